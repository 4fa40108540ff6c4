"""`hf`: the model's own position code from transformers, run on a graph's feeds.

A graph built with `posexport build --from-model DIR` records the model (folder, architecture, role and a
recipe) in its manifest; `posexport parity --from-model DIR GRAPH.onnx` supplies it for any graph. The
session builds the model's position module from transformers' own classes and its config (read by
transformers from the folder; trained tables read from the checkpoint) and computes the graph's contract
output with it: the rotary embedding class and the model's apply function for rope, T5Attention's
compute_bias (MPNetEncoder's compute_position_bias), the alibi builders, the embedding modules with their offsets.

Its outputs are judged against the float64 oracle of the graph's parameters with the model-agreement
bound (:func:`model_bound`): a graph within the float64 bound and the model's code within this one agree
with each other, and a misread (a wrong rotary dim, base, scaling or offset) misses it by orders of
magnitude. It runs no graph, so it is not among the graph runtimes of a default parity run: `parity
--from-model` adds it, `--runtimes hf` names it (for a graph built --from-model, whose manifest records
the model); a graph without a model reports it unavailable, saying why.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Runtime, Session, SessionOptions
from ..upstream import transformers_attr
from .families import FAMILIES
from .hf_code import auto_config, torch_float, trained
from .recipes import LearnedRecipe, Recipe, RecipeError, RopeRecipe, SinusoidTableRecipe, T5Recipe, WhisperSinusoidRecipe

# transformers forms rope angles as float32 position × float32 inverse frequency: the angle of the fastest
# pair (θ_0 = 1) is off by up to a few float32 ulps of the position, ~6e-3 at position 100000 in practice.
# The bound allows 8 ulps (2^-21 · p) on top of the graph's own bound: 0.05 at 1e5, 8e-6 at 16, against
# errors of order 1 from a misread. A resampled grid's source coordinates (up to the trained side, also in
# float32) move its filter weights the same way: 2^-21 · side (2.3e-5 for a 48-patch grid; a misread
# interpolation is off by 1e-2 and more).
ANGLE_ULPS = 2.0**-21
MIN_TRANSFORMERS = 5


def model_bound(graph_bound: float, largest_position: int | None) -> float:
    """max|hf − oracle| / max(1, max|oracle|) allowed: the graph's bound + 2^-21 · max(1, largest position or
    source coordinate)."""
    return graph_bound + ANGLE_ULPS * max(1, largest_position or 0)


def recipe_problem(entry: Mapping[str, Any]) -> str:
    """Why this model entry cannot be run ('' when it can): a local model folder, transformers code only."""
    if not isinstance(entry.get("folder"), str) or not Path(entry["folder"]).is_dir():
        return f"the model folder {entry.get('folder')!r} is not here (a local folder is needed; nothing is downloaded)"
    data = entry.get("hf")
    if not isinstance(data, Mapping) or data.get("kind") not in RECIPES:
        return f"no transformers code for {entry.get('architecture')} role {entry.get('role')}"
    try:
        RECIPES[data["kind"]].from_json(data)
    except RecipeError as e:
        return str(e)
    return ""


def session(artifact: Artifact, entry: Mapping[str, Any]) -> Session:
    """The session running the model's code for a manifest's model entry (whose recipe_problem is '')."""
    recipe = RECIPES[entry["hf"]["kind"]].from_json(entry["hf"])
    return SESSIONS[recipe.kind](artifact, recipe, Path(entry["folder"]))


class RopeSession(Session):
    """The model's rotary embedding class gives cos/sin (or DeepSeek-V2's complex freqs); its apply
    function rotates x as q."""

    def __init__(self, artifact: Artifact, recipe: RopeRecipe, folder: Path):
        cfg = auto_config(folder, recipe)
        if recipe.rope_theta is not None:  # one of the model's rotary modules per base (Granite-SWA's layer_rope_theta)
            cfg = copy.deepcopy(cfg)
            cfg.rope_parameters = {**cfg.rope_parameters, "rope_theta": recipe.rope_theta}
        # Molmo2's layers outside rope_scaling_layers: its rotary built unscaled, as the model builds it.
        unscaled = {"scaled": False} if recipe.unscaled else {}
        self.rotary = transformers_attr(recipe.module, recipe.rotary)(config=cfg, **unscaled).eval()
        self.apply = transformers_attr(recipe.module, recipe.apply)
        self.extra = (recipe.layer_type,) if recipe.layer_type else ()
        self.bshd = artifact.params.layout == "bshd"
        # StableLM's attention splits off the rotary channels itself; its apply function rotates all it gets.
        self.split = recipe.split
        # Llama-4's apply_rotary_emb takes q as [batch, seq, heads, dim]; Gemma-4's rotates one tensor.
        self.bshd_apply, self.single_apply = recipe.bshd_apply, recipe.single_apply

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        q = x.transpose(1, 2) if self.bshd else x  # transformers' [batch, heads, seq, dim]
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            emb = self.rotary(q, positions, *self.extra)
            if self.bshd_apply:
                out = self.apply(q.transpose(1, 2), q.transpose(1, 2), emb)[0]
                return (out if self.bshd else out.transpose(1, 2)).numpy()
            if self.single_apply:
                out = self.apply(q, *emb)
                return (out.transpose(1, 2) if self.bshd else out).numpy()
            if self.split:  # the model's own rotary width: cos has one entry per rotated channel
                rotated, rest = q[..., : emb[0].shape[-1]], q[..., emb[0].shape[-1] :]
                out = torch.cat([self.apply(rotated, rotated, *emb)[0], rest], dim=-1)
            else:
                out, _ = self.apply(q, q, emb) if torch.is_tensor(emb) else self.apply(q, q, *emb)
        out = out.transpose(1, 2) if self.bshd else out
        return out.numpy()


class T5Session(Session):
    """T5Attention's (UMT5Attention's) compute_bias of a layer holding the model's trained table; queries
    sit at the end, as with a KV cache."""

    def __init__(self, artifact: Artifact, recipe: T5Recipe, folder: Path):
        cfg = auto_config(folder, recipe)
        cfg.is_decoder = recipe.decoder
        attention = transformers_attr(recipe.module, recipe.attention)
        self.attention = attention(cfg, has_relative_attention_bias=True, layer_idx=0).eval()
        self.attention.relative_attention_bias.weight.data = trained(folder, recipe.key)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        scores = torch_float(feeds["scores"])
        q_len, k_len = scores.shape[-2:]
        with torch.no_grad():
            bias = self.attention.compute_bias(q_len, k_len, past_seen_tokens=k_len - q_len)
        return (scores + bias).numpy()


class LearnedSession(Session):
    """x + the model's trained position table at position_ids: an nn.Embedding as GPT-2, BERT and RoBERTa
    hold it, or OPT's OPTLearnedPositionalEmbedding, which adds its offset of 2 itself; BART-like tables
    (recipe offset) at position_ids + their offset, as their <X>LearnedPositionalEmbedding looks them up."""

    def __init__(self, artifact: Artifact, recipe: LearnedRecipe, folder: Path):
        import torch

        table = trained(folder, recipe.key)
        table = table.reshape(-1, table.shape[-1])  # AST's and MGP-STR's are [1, rows, hidden] parameters
        if recipe.opt:
            opt_embedding = transformers_attr("transformers.models.opt.modeling_opt", "OPTLearnedPositionalEmbedding")
            self.embedding = opt_embedding(table.shape[0] - 2, table.shape[1])
            self.embedding.weight.data = table
            self.call = lambda positions: self.embedding(None, 0, position_ids=positions)
        else:
            self.embedding, offset = torch.nn.Embedding.from_pretrained(table), recipe.offset
            self.call = lambda positions: self.embedding(positions + offset)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.no_grad():
            rows = self.call(torch.from_numpy(np.ascontiguousarray(feeds["position_ids"])))
        return (torch_float(feeds["x"]) + rows).numpy()


class SinusoidTableSession(Session):
    """x + the model's own fixed sinusoid table at position_ids: whisper's `sinusoids(length, d_model)` (what
    fills its encoder's position table), or the recipe's create_sinusoidal_positions (VideoPrism's text tower),
    get_sinusoid_encoding_table (VideoMAE's, [1, rows, channels]) or <X>SinusoidalPositionalEmbedding.get_embedding
    (MusicGen's decoder)."""

    def __init__(self, artifact: Artifact, recipe: SinusoidTableRecipe | WhisperSinusoidRecipe, folder: Path):
        self.channels = artifact.params.d_model
        create = transformers_attr(recipe.module, recipe.create) if isinstance(recipe, SinusoidTableRecipe) else None
        self.create = getattr(create, "get_embedding", create)  # an embedding class builds its table with get_embedding

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        sinusoids = transformers_attr("transformers.models.whisper.modeling_whisper", "sinusoids")

        positions = np.asarray(feeds["position_ids"])
        table = (self.create or sinusoids)(int(positions.max()) + 1, self.channels).numpy().reshape(-1, self.channels)
        return np.asarray(feeds["x"], dtype=np.float32) + table[positions]


# The recipes several families' roles share, each with the session running the model's code for it; then each
# family's own. RECIPES reads a manifest's recipe by its kind; SESSIONS runs it.
SHARED = {RopeRecipe: RopeSession, T5Recipe: T5Session, LearnedRecipe: LearnedSession,
          WhisperSinusoidRecipe: SinusoidTableSession, SinusoidTableRecipe: SinusoidTableSession}
JUDGES = {**SHARED, **{recipe: judge for family in FAMILIES for recipe, judge in family.sessions.items()}}
RECIPES: dict[str, type[Recipe]] = {recipe.kind: recipe for recipe in JUDGES}
SESSIONS: dict[str, type[Session]] = {recipe.kind: judge for recipe, judge in JUDGES.items()}


class Hf(Runtime):
    name = "hf"
    description = "transformers: the model's own position code (judged with the model-agreement bound)"
    # It runs the model's code, never the ONNX graph: graph properties are not its to hold.
    runs_graphs = False
    runs_graph_properties = False

    def __init__(self, model: Mapping[str, Any] | None = None):
        self.model = model

    def entry(self, artifact: Artifact) -> Mapping[str, Any] | None:
        return self.model or artifact.manifest.get("model")

    def available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("transformers") is None:
            return False, "transformers is not installed (pip install 'posexport[hf]')"
        version = importlib.metadata.version("transformers")
        if int(version.split(".")[0]) < MIN_TRANSFORMERS:
            return False, f"transformers {version} is older than {MIN_TRANSFORMERS}.0, whose classes this runtime calls (pip install 'posexport[hf]')"
        return True, ""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        entry = self.entry(artifact)
        if not isinstance(entry, Mapping):
            return False, "no model: build the graph with --from-model DIR, or run parity --from-model DIR"
        problem = recipe_problem(entry)
        return not problem, problem

    def caveats(self, artifact: Artifact) -> str:
        return "judged with the model-agreement bound (graph bound + 2^-21 · largest position or source coordinate)"

    def bound(self, artifact: Artifact, feeds: Mapping[str, np.ndarray], graph_bound: float) -> float:
        # The ulps term applies where the model forms angles (rope, sinusoid) or resamples a table at float32
        # source coordinates (a trained grid); tables looked up and biases agree to rounding.
        encoding = artifact.encoding
        if encoding.position_scaled_tolerance:
            return model_bound(graph_bound, encoding.largest_position(artifact.params, feeds))
        return model_bound(graph_bound, encoding.source_coordinate_extent(artifact.params))

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> Session:
        return session(artifact, self.entry(artifact))
