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
import importlib.metadata
import importlib.util
import inspect
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import checkpoint
from ..contract import Artifact
from ..upstream import transformers_attr
from .base import Runtime, Session, SessionOptions

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


# A recipe names transformers code; a manifest is user input, so only these names are ever imported.
MODULE = re.compile(r"transformers\.models\.[a-z0-9_]+\.modeling_[a-z0-9_]+")
CALLABLES = {
    "rotary": re.compile(r"[A-Za-z0-9_]+Rotary(Positional)?Embedding"),
    "apply": re.compile(r"apply_rotary_pos_emb(_interleave|_vision)?|apply_rotary_emb"),
    "attention": re.compile(r"(UM)?T5Attention|SwitchTransformersAttention|Pop2PianoAttention|Pix2StructTextAttention"
                            r"|Llama4TextAttention"
                            r"|(DonutSwin|MaskFormerSwin|ClapAudio|Swinv2|Swin2SR)SelfAttention"),
    "embeddings": re.compile(r"[A-Za-z0-9_]+Embeddings"),
    "table": re.compile(r"position_embeddings?(\.weight)?"),
    "resize": re.compile(r"_resize_pos_embed"),
    "scale": re.compile(r"get_llama_4_attn_scale"),
    "create": re.compile(r"create_sinusoidal_positions|get_sinusoid_encoding_table|[A-Za-z0-9_]+SinusoidalPositionalEmbedding"),
    "tower": re.compile(r"[A-Za-z0-9_]+Vision(Model|Encoder|Embeddings)"),
    "bias": re.compile(r"[A-Za-z0-9_]+RelativePositionBias"),
    "positional": re.compile(r"[A-Za-z0-9_]+PositionalEmbedding"),
    "part": re.compile(r"([a-z0-9_]+_config|encoder|decoder)(\.[a-z0-9_]+_config)*"),  # a composite's sub-config (CLVP's speech_config)
}


# A Pix2Struct-style tower's id columns: flattened_patches[:, :, 0] is each patch's row, [:, :, 1] its column.
PATCH_AXES = ("row", "column")


def recipe_problem(entry: Mapping[str, Any]) -> str:
    """Why this model entry cannot be run ('' when it can): a local model folder, transformers code only."""
    if not isinstance(entry.get("folder"), str) or not Path(entry["folder"]).is_dir():
        return f"the model folder {entry.get('folder')!r} is not here (a local folder is needed; nothing is downloaded)"
    recipe = entry.get("hf")
    if not isinstance(recipe, Mapping) or recipe.get("kind") not in SESSIONS:
        return f"no transformers code for {entry.get('architecture')} role {entry.get('role')}"
    if "module" in recipe and not MODULE.fullmatch(str(recipe["module"])):
        return f"recipe module {recipe['module']!r} is not a transformers model module"
    for field, allowed in CALLABLES.items():
        if field in recipe and not allowed.fullmatch(str(recipe[field])):
            return f"recipe {field} {recipe[field]!r} is not transformers position code"
    if recipe.get("axis", "row") not in PATCH_AXES:
        return f"recipe axis {recipe['axis']!r} is not one of {', '.join(PATCH_AXES)}"
    for field in ("window", "pretrained_window"):  # window sizes the model's attention class is built with
        size = recipe.get(field, 0)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            return f"recipe {field} {size!r} is not a window size"
    theta = recipe.get("rope_theta", 1.0)
    if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
        return f"recipe rope_theta {theta!r} is not a positive number"
    return ""


def auto_config(entry: Mapping[str, Any]) -> Any:
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(entry["folder"], local_files_only=True)
    for name in entry["hf"]["part"].split(".") if "part" in entry["hf"] else ():  # a composite's part: its own config
        cfg = getattr(cfg, name)
    if entry["hf"].get("vision_config"):
        return cfg.vision_config
    return cfg.get_text_config() if entry["hf"].get("text_config") else cfg


def torch_float(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))


class RopeSession(Session):
    """The model's rotary embedding class gives cos/sin (or DeepSeek-V2's complex freqs); its apply
    function rotates x as q."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        cfg = auto_config(entry)
        if "rope_theta" in recipe:  # one of the model's rotary modules per base (Granite-SWA's layer_rope_theta)
            cfg = copy.deepcopy(cfg)
            cfg.rope_parameters = {**cfg.rope_parameters, "rope_theta": recipe["rope_theta"]}
        # Molmo2's layers outside rope_scaling_layers: its rotary built unscaled, as the model builds it.
        unscaled = {"scaled": False} if recipe.get("unscaled") else {}
        self.rotary = transformers_attr(recipe["module"], recipe["rotary"])(config=cfg, **unscaled).eval()
        self.apply = transformers_attr(recipe["module"], recipe["apply"])
        self.extra = (recipe["layer_type"],) if recipe.get("layer_type") else ()
        self.bshd = artifact.params.layout == "bshd"
        # StableLM's attention splits off the rotary channels itself; its apply function rotates all it gets.
        self.split = bool(recipe.get("split"))
        # Llama-4's apply_rotary_emb takes q as [batch, seq, heads, dim]; Gemma-4's rotates one tensor.
        self.bshd_apply, self.single_apply = bool(recipe.get("bshd_apply")), bool(recipe.get("single_apply"))

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


class VisionRopeSession(Session):
    """A Qwen-VL vision tower's own axial VisionRotaryEmbedding on each patch's (height, width) and its
    apply_rotary_pos_emb_vision, per batch row (the tower has no batch axis)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        self.rotary = transformers_attr(recipe["module"], recipe["rotary"])(auto_config(entry)).eval()
        self.apply = transformers_attr(recipe["module"], recipe["apply"])
        self.p = artifact.params

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        p, x = self.p, torch_float(feeds["x"])
        bshd = x if p.layout == "bshd" else x.transpose(1, 2) if p.layout == "bhsd" else x.unflatten(-1, (p.heads, p.head_dim))
        rows = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))  # [2, batch, seq]
        with torch.no_grad():
            out = torch.stack([self.apply(bshd[b], bshd[b], *self.rotary(bshd[b], rows[:, b].T))[0] for b in range(bshd.shape[0])])
        return (out if p.layout == "bshd" else out.transpose(1, 2) if p.layout == "bhsd" else out.flatten(-2)).numpy()


class ClvpRopeSession(Session):
    """CLVP's encoder rotary: ClvpRotaryPositionalEmbedding's angles for positions 0 … the largest, whose cos/sin
    its apply_rotary_pos_emb indexes at position_ids, on the head's first rotary channels (its attention's split)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        self.rotary = transformers_attr(recipe["module"], recipe["rotary"])(auto_config(entry)).eval()
        self.apply = transformers_attr(recipe["module"], recipe["apply"])
        self.bshd = artifact.params.layout == "bshd"

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        q = x.transpose(1, 2) if self.bshd else x  # transformers' [batch, heads, seq, dim]
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            angles = self.rotary(torch.zeros(1, int(positions.max()) + 1))
            cos, sin = angles.cos().squeeze(0), angles.sin().squeeze(0)
            rotated = q[..., : cos.shape[-1]]
            out = torch.cat([self.apply(rotated, rotated, rotated, cos, sin, positions)[0], q[..., cos.shape[-1] :]], dim=-1)
        return (out.transpose(1, 2) if self.bshd else out).numpy()


def trained(entry: Mapping[str, Any], key: str | None = None) -> Any:
    """The role's trained table (or its tensor ``key``), read from the model's checkpoint as a float32 torch tensor."""
    return torch_float(checkpoint.read_tensor(*checkpoint.locate(Path(entry["folder"]), (key or entry["hf"]["key"],))))


class T5Session(Session):
    """T5Attention's (UMT5Attention's) compute_bias of a layer holding the model's trained table; queries
    sit at the end, as with a KV cache."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        cfg = auto_config(entry)
        cfg.is_decoder = recipe["decoder"]
        attention = transformers_attr(recipe["module"], recipe["attention"])
        self.attention = attention(cfg, has_relative_attention_bias=True, layer_idx=0).eval()
        self.attention.relative_attention_bias.weight.data = trained(entry)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        scores = torch_float(feeds["scores"])
        q_len, k_len = scores.shape[-2:]
        with torch.no_grad():
            bias = self.attention.compute_bias(q_len, k_len, past_seen_tokens=k_len - q_len)
        return (scores + bias).numpy()


class MpnetBiasSession(Session):
    """MPNetEncoder's own compute_position_bias, the encoder built without its layers (num_hidden_layers 0) holding
    the model's trained table. MPNet's queries are its keys (q_len = k_len): the bias of the last q_len queries
    is the last q_len rows of its k_len × k_len bias, as with a KV cache."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        encoder_class = transformers_attr("transformers.models.mpnet.modeling_mpnet", "MPNetEncoder")
        cfg = copy.deepcopy(auto_config(entry))
        cfg.num_hidden_layers = 0
        self.encoder = encoder_class(cfg).eval()
        self.encoder.relative_attention_bias.weight.data = trained(entry)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        scores = torch_float(feeds["scores"])
        q_len, k_len = scores.shape[-2:]
        with torch.no_grad():
            bias = self.encoder.compute_position_bias(torch.zeros(1, k_len, 1))[:, :, k_len - q_len :]
        return (scores + bias).numpy()


class AlibiSession(Session):
    """BLOOM's build_alibi_tensor or MPT's build_mpt_alibi_tensor (sliced to k_len as MPT's attention does),
    shifted per query row by the bias at the query's own position, with the causal mask: the graph's form
    of the same attention (softmax removes the per-row constant)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        self.recipe, self.heads = entry["hf"], artifact.params.heads

    def model_bias(self, k_len: int) -> Any:
        import torch

        if self.recipe["model"] == "bloom":
            build_alibi_tensor = transformers_attr("transformers.models.bloom.modeling_bloom", "build_alibi_tensor")
            return build_alibi_tensor(torch.ones(1, k_len), self.heads, torch.float32)  # [heads, 1, k_len]
        build_mpt_alibi_tensor = transformers_attr("transformers.models.mpt.modeling_mpt", "build_mpt_alibi_tensor")

        # MPT builds max_seq_len columns and keeps the last k_len; past it, the same function made longer.
        full = max(self.recipe["max_seq_len"], k_len)
        return build_mpt_alibi_tensor(self.heads, full)[:, :, full - k_len :].float()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        scores = torch_float(feeds["scores"])
        q_len, k_len = scores.shape[-2:]
        with torch.no_grad():
            bias = self.model_bias(k_len)  # [heads, 1, k_len]
            queries = torch.arange(k_len - q_len, k_len)
            shifted = bias - bias[:, 0, queries].unsqueeze(-1)  # [heads, q_len, k_len]
            future = torch.arange(k_len)[None, :] > queries[:, None]
            shifted = shifted.masked_fill(future, float("-inf"))
        return (scores + shifted).numpy()


class LearnedSession(Session):
    """x + the model's trained position table at position_ids: an nn.Embedding as GPT-2, BERT and RoBERTa
    hold it, or OPT's OPTLearnedPositionalEmbedding, which adds its offset of 2 itself; BART-like tables
    (recipe offset) at position_ids + their offset, as their <X>LearnedPositionalEmbedding looks them up."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        import torch

        table = trained(entry)
        table = table.reshape(-1, table.shape[-1])  # AST's and MGP-STR's are [1, rows, hidden] parameters
        if entry["hf"].get("opt"):
            opt_embedding = transformers_attr("transformers.models.opt.modeling_opt", "OPTLearnedPositionalEmbedding")
            self.embedding = opt_embedding(table.shape[0] - 2, table.shape[1])
            self.embedding.weight.data = table
            self.call = lambda positions: self.embedding(None, 0, position_ids=positions)
        else:
            self.embedding, offset = torch.nn.Embedding.from_pretrained(table), int(entry["hf"].get("offset", 0))
            self.call = lambda positions: self.embedding(positions + offset)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.no_grad():
            rows = self.call(torch.from_numpy(np.ascontiguousarray(feeds["position_ids"])))
        return (torch_float(feeds["x"]) + rows).numpy()


class PatchCoordinatesSession(Session):
    """Pix2Struct's (Kosmos-2.5's) vision embeddings forward on the model's trained row and column tables:
    flattened_patches of [row ids, column ids | x], the role's position_ids in its axis's column; its patch
    projection the identity (x is the projection's output) and the other axis's table zeroed (its rows are the
    other role's)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        import torch

        recipe = entry["hf"]
        self.embeddings = transformers_attr(recipe["module"], recipe["embeddings"])(auto_config(entry)).eval()
        holder = recipe["key"].rsplit(".", 2)[0]  # the embeddings module: both tables by the class's own names
        for axis in PATCH_AXES:
            table = getattr(self.embeddings, f"{axis}_embedder").weight
            table.data = trained(entry, f"{holder}.{axis}_embedder.weight") if axis == recipe["axis"] \
                else torch.zeros_like(table)
        self.embeddings.patch_projection = torch.nn.Identity()
        self.column = PATCH_AXES.index(recipe["axis"])

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        ids = torch.zeros(*x.shape[:-1], 2)
        ids[..., self.column] = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"])).float()
        with torch.no_grad():
            return self.embeddings(torch.cat([ids, x], dim=-1)).numpy()


class VitSession(Session):
    """ViTEmbeddings' (DeiT's, BEiT's, Swin's) own interpolate_pos_encoding (DPT's _resize_pos_embed) on the
    model's trained table, added to [class (and distillation) tokens | patches] (Swin: the patches alone, y as a grid)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        self.embeddings = transformers_attr(recipe["module"], recipe["embeddings"])(auto_config(entry)).eval()
        self.table = recipe.get("table", "position_embeddings")  # SigLIP's: an nn.Embedding
        table = self.embeddings.get_parameter(self.table)
        table.data = trained(entry).reshape(table.shape)
        self.patch = entry["hf"]["patch_size"]
        self.resize = getattr(self.embeddings, recipe["resize"]) if "resize" in recipe else None

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        patches = x.reshape(batch, h * w, dim)
        tokens = torch.cat([torch_float(feeds["cls"]), patches], dim=1) if "cls" in feeds else patches
        with torch.no_grad():
            if self.resize:  # DPT's: the table and the target grid
                positions = self.resize(self.embeddings.get_parameter(self.table), h, w)
            else:
                positions = self.embeddings.interpolate_pos_encoding(tokens, h * self.patch, w * self.patch)
            y = tokens + positions
        return (y if "cls" in feeds else y.reshape(batch, h, w, dim)).numpy()


class NaflexSession(Session):
    """SigLIP-2's Siglip2VisionEmbeddings.resize_positional_embeddings on the model's trained table (reshaped to its
    square grid, as its forward does), at each image's (grid_h, grid_w) with no padding, added to the patches."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        self.embeddings = transformers_attr(recipe["module"], recipe["embeddings"])(auto_config(entry)).eval()
        self.table = recipe["table"]
        table = self.embeddings.get_parameter(self.table)
        table.data = trained(entry).reshape(table.shape)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        side = self.embeddings.position_embedding_size
        with torch.no_grad():
            grid = self.embeddings.get_parameter(self.table).reshape(side, side, -1)
            positions = self.embeddings.resize_positional_embeddings(grid, torch.tensor([[h, w]] * batch), max_length=h * w)
        return (x.reshape(batch, h * w, dim) + positions).reshape(batch, h, w, dim).numpy()


class NavitSession(Session):
    """A NaViT tower's own embeddings forward on the model's trained table, its patch projection the identity (x's
    patches are its pixels, one pixel a patch): Idefics2's with every patch of the grid unmasked, MiniCPM-V's image by
    image with its (h, w) as target_sizes."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        import torch

        recipe = entry["hf"]
        self.embeddings = transformers_attr(recipe["module"], recipe["embeddings"])(auto_config(entry)).eval()
        table = self.embeddings.position_embedding.weight
        table.data = trained(entry).reshape(table.shape)
        self.embeddings.patch_embedding, self.embeddings.patch_size = torch.nn.Identity(), 1
        self.target_sizes = bool(recipe.get("target_sizes"))

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        pixels = x.permute(0, 3, 1, 2)  # [batch, hidden, h, w]: the forward's flatten(2).transpose(1, 2) gives x's patches
        with torch.no_grad():
            if self.target_sizes:  # MiniCPM-V packs its images into one sequence: one image a call
                y = torch.cat([self.embeddings(pixels[b : b + 1], target_sizes=torch.tensor([[h, w]])) for b in range(batch)])
            else:
                y = self.embeddings(pixels, patch_attention_mask=torch.ones(batch, h, w, dtype=torch.bool))
        return y.reshape(batch, h, w, dim).numpy()


class GridSampleSession(VitSession):
    """GLM-Image's (GLM-4V's) vision embeddings forward on the model's trained table: each image's patches packed
    [patches, hidden] with their row and column (raster order), the table sampled there (F.grid_sample,
    bilinear (bicubic), border padding) and added."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        rows, cols = torch.arange(h).repeat_interleave(w), torch.arange(w).repeat(h)
        with torch.no_grad():
            y = [self.embeddings(x[b].reshape(h * w, dim), [h * w], torch.tensor([[1, h, w]]), rows, cols) for b in range(batch)]
        return torch.stack(y).reshape(batch, h, w, dim).numpy()


class GridInterpolateSession(Session):
    """A Qwen3-VL vision tower's pos_embed as its forward adds it: transformers' own
    get_vision_interpolation_indices_and_weights with the tower's (PaddleOCR-VL's: its embeddings') interpolation mode
    and align_corners (built on the meta device: nothing allocated) and its num_grid_per_side, the trained rows gathered
    and summed with their weights. Patches in raster order (spatial_merge_size 1): the graph's grid."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        import torch

        with torch.device("meta"):
            tower = transformers_attr(entry["hf"]["module"], entry["hf"]["tower"])(auto_config(entry))
        self.side, self.mode, self.corners = tower.num_grid_per_side, tower.interpolation_mode, tower.interpolation_align_corners
        self.table = trained(entry)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch
        get_vision_interpolation_indices_and_weights = transformers_attr(
            "transformers.vision_utils", "get_vision_interpolation_indices_and_weights")

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        with torch.no_grad():
            indices, weights = get_vision_interpolation_indices_and_weights(
                torch.tensor([[1, h, w]]), self.side, mode=self.mode, align_corners=self.corners, spatial_merge_size=1)
            rows = (torch.nn.functional.embedding(indices, self.table) * weights[:, :, None]).sum(1)
        return (x + rows.reshape(h, w, dim)).numpy()


class SwinSession(Session):
    """SwinRelativePositionBias (its own index buffer) holding the block's trained table, added to scores; or,
    for a Swin copy that adds the bias inline (recipe attention: Donut-Swin's, CLAP's), that self-attention
    itself, see inline_bias."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        import torch

        window, heads = entry["hf"]["window"], artifact.params.heads
        if "attention" in entry["hf"]:
            self.bias = inline_bias(transformers_attr(entry["hf"]["module"], entry["hf"]["attention"]), auto_config(entry),
                                    heads, window, trained(entry))
            return
        swin_bias = transformers_attr("transformers.models.swin.modeling_swin", "SwinRelativePositionBias")
        module = swin_bias(heads, (window, window)).eval()
        module.relative_position_bias_table.data = trained(entry)
        with torch.no_grad():
            self.bias = module()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return (torch_float(feeds["scores"]) + self.bias).numpy()


def inline_bias(attention_class: Any, config: Any, heads: int, window: int, table: Any) -> Any:
    """The window bias a Swin copy's self-attention adds inline: the class built for the block (head size 1)
    holding the trained table, see softmax_input."""
    attention = attention_class(config, heads, heads, window).eval()
    attention.relative_position_bias_table.data = table
    return softmax_input(attention, heads, window)


def softmax_input(attention: Any, heads: int, window: int) -> Any:
    """What reaches a window self-attention's softmax (head size 1) with its query projection zeroed, run
    forward on random hidden states: q·kᵀ (Swin-V2: cos(q, k), F.normalize making a zero q zero) is then 0,
    so this is the bias alone (captured there)."""
    import torch
    from torch.overrides import TorchFunctionMode

    attention.query.weight.data.zero_()
    if attention.query.bias is not None:
        attention.query.bias.data.zero_()
    seen = []

    class SoftmaxInput(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax):
                seen.append(args[0].detach().clone())
            return func(*args, **(kwargs or {}))

    hidden = torch.from_numpy(np.random.default_rng(0).standard_normal((1, window * window, heads)).astype(np.float32))
    with torch.no_grad(), SoftmaxInput():
        attention(hidden)
    return seen[0]


class ContinuousBiasSession(Session):
    """Swin-V2's continuous position bias: the model's own self-attention class (Swinv2SelfAttention,
    Swin2SRSelfAttention) built at the block's window and pretrained window, its continuous_position_bias_mlp
    holding the checkpoint's tensors; the bias it adds after its scaled cosine scores (16·sigmoid of the MLP's
    table over its own relative_coords_table, gathered) captured at its softmax, see softmax_input."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        heads, window, pretrained = artifact.params.heads, recipe["window"], recipe["pretrained_window"]
        attention_class = transformers_attr(recipe["module"], recipe["attention"])
        attention = attention_class(auto_config(entry), heads, heads, window, (pretrained, pretrained)).eval()
        attention.continuous_position_bias_mlp.load_state_dict(
            {name: trained(entry, f"{recipe['key']}.{name}") for name in ("0.weight", "0.bias", "2.weight")})
        self.bias = softmax_input(attention, heads, window)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return (torch_float(feeds["scores"]) + self.bias).numpy()


class BeitSession(Session):
    """BeitRelativePositionBias (or the model's copy of it, as the recipe names) holding the layer's (or the
    shared) trained table, at the trained grid."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        bias = transformers_attr(recipe.get("module", "transformers.models.beit.modeling_beit"),
                           recipe.get("bias", "BeitRelativePositionBias"))
        # Data2Vec-Vision's copy takes its window as an argument; BEiT's reads it from the config.
        window = {"window_size": (artifact.params.window_h, artifact.params.window_w)} \
            if "window_size" in inspect.signature(bias).parameters else {}
        self.bias = bias(auto_config(entry), **window).eval()
        self.bias.relative_position_bias_table.data = trained(entry)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.no_grad():
            return (torch_float(feeds["scores"]) + self.bias(self.bias.window_size)).numpy()


class SinusoidTableSession(Session):
    """x + the model's own fixed sinusoid table at position_ids: whisper's `sinusoids(length, d_model)` (what
    fills its encoder's position table), or the recipe's create_sinusoidal_positions (VideoPrism's text tower),
    get_sinusoid_encoding_table (VideoMAE's, [1, rows, channels]) or <X>SinusoidalPositionalEmbedding.get_embedding
    (MusicGen's decoder)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        self.channels = artifact.params.d_model
        recipe = entry["hf"]
        create = transformers_attr(recipe["module"], recipe["create"]) if "create" in recipe else None
        self.create = getattr(create, "get_embedding", create)  # an embedding class builds its table with get_embedding

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        sinusoids = transformers_attr("transformers.models.whisper.modeling_whisper", "sinusoids")

        positions = np.asarray(feeds["position_ids"])
        table = (self.create or sinusoids)(int(positions.max()) + 1, self.channels).numpy().reshape(-1, self.channels)
        return np.asarray(feeds["x"], dtype=np.float32) + table[positions]


class SinusoidModuleSession(Session):
    """x + the model's own sinusoid module, built from the folder's config, called on position_ids (TimesFM's
    TimesFmPositionalEmbedding: its rows at any [batch, seq] positions)."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        self.module = transformers_attr(recipe["module"], recipe["positional"])(auto_config(entry)).eval()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        positions = torch.from_numpy(np.asarray(feeds["position_ids"], dtype=np.float32))
        with torch.no_grad():
            return np.asarray(feeds["x"], dtype=np.float32) + self.module(position=positions).numpy()


class QueryScaleSession(Session):
    """x times the model's own get_llama_4_attn_scale(position_ids, β, F) (Ministral-3), broadcast over
    heads and channels as the graph's layout has them."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        self.scale = transformers_attr(entry["hf"]["module"], entry["hf"]["scale"])
        self.p = artifact.params

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            s = self.scale(positions, self.p.beta, self.p.floor_scale)[:, 0, :, 0].float()  # [batch, seq]
        for axis in {"bshd": (2, 3), "bhsd": (1, 3), "bsh": (2,)}[self.p.layout]:
            s = s.unsqueeze(axis)
        return (torch_float(feeds["x"]) * s).numpy()


class GptjSession(Session):
    """GPT-J's (CodeGen's) own create_sinusoidal_positions rows at position_ids and its apply_rotary_pos_emb
    on the first rotary_dim channels of x [batch, seq, heads, dim], as its attention does."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        recipe = entry["hf"]
        self.create, self.apply = transformers_attr(recipe["module"], recipe["create"]), transformers_attr(recipe["module"], recipe["apply"])
        self.p = artifact.params

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        p, bshd = self.p, to_bshd(feeds["x"], self.p)
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            sincos = self.create(int(positions.max()) + 1, p.rotary_dim)[positions]
            sin, cos = torch.split(sincos, p.rotary_dim // 2, dim=-1)
            out = torch.cat([self.apply(bshd[..., : p.rotary_dim], sin, cos), bshd[..., p.rotary_dim :]], dim=-1)
        return from_bshd(out, p)


def to_bshd(x: np.ndarray, p: Any) -> Any:
    """x of a rope graph's layout as a tensor [batch, seq, heads, dim]."""
    x = torch_float(x)
    return x if p.layout == "bshd" else x.transpose(1, 2) if p.layout == "bhsd" else x.unflatten(-1, (p.heads, p.head_dim))


def from_bshd(out: Any, p: Any) -> np.ndarray:
    return (out if p.layout == "bshd" else out.transpose(1, 2) if p.layout == "bhsd" else out.flatten(-2)).numpy()


class RoformerSession(Session):
    """RoFormer's own table (RoFormerSinusoidalPositionalEmbedding.create_weight) at position_ids and
    RoFormerSelfAttention.apply_rotary_position_embeddings on x [batch, heads, seq, dim], as its attention does."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        self.table = transformers_attr(entry["hf"]["module"], "RoFormerSinusoidalPositionalEmbedding")
        self.attention = transformers_attr(entry["hf"]["module"], "RoFormerSelfAttention")
        self.p = artifact.params

    def create(self, rows: int, dim: int) -> Any:
        """The table's rows 0 … rows − 1 ([sin | cos] halves, as GPT-J's create_sinusoidal_positions)."""
        return self.table(rows, dim).create_weight()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        bhsd = to_bshd(feeds["x"], self.p).transpose(1, 2)
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            table = self.create(int(positions.max()) + 1, self.p.head_dim)[positions][:, None]
            out, _ = self.attention.apply_rotary_position_embeddings(table, bhsd, bhsd)
        return from_bshd(out.transpose(1, 2), self.p)


CAPTURE = "posexport_capture_query"


def capture_query(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, None]:
    """An attention function that keeps the query it is handed (what the layer made of q) and attends to
    nothing: the Llama-4 session reads the layer's own temperature-tuned q from it."""
    module.captured_query = query
    return query.new_zeros(query.shape).transpose(1, 2), None


class PastLength:
    """The cache Llama4TextAttention asks for the past length (its positions start there); it stores nothing."""

    def __init__(self, length: int):
        self.length = length

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def update(self, key: Any, value: Any, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return key, value


class Llama4TemperatureSession(Session):
    """Llama4TextAttention of a NoPE layer, q_proj the identity, run on x: its own temperature tuning scales
    q at the cache positions; runs of consecutive positions go in one call (past length = the run's first
    position), any other position on its own."""

    def __init__(self, artifact: Artifact, entry: Mapping[str, Any]):
        import copy

        import torch
        from transformers import AttentionInterface

        p, recipe = artifact.params, entry["hf"]
        AttentionInterface.register(CAPTURE, capture_query)
        cfg = copy.deepcopy(auto_config(entry))
        cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = p.heads * p.head_dim, p.heads, p.heads, p.head_dim
        cfg._attn_implementation = CAPTURE
        self.attention = transformers_attr(recipe["module"], recipe["attention"])(cfg, recipe["layer"]).eval()
        with torch.no_grad():
            self.attention.q_proj.weight.copy_(torch.eye(p.heads * p.head_dim))
        self.p = p

    def scaled(self, rows: Any, start: int) -> Any:
        """[1, heads, seq, dim] of the layer for tokens at start, start + 1, …"""
        import torch

        with torch.no_grad():
            self.attention(rows, position_embeddings=None, attention_mask=None, cache=PastLength(start))
        return self.attention.captured_query

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        p, x = self.p, torch_float(feeds["x"])
        bshd = x if p.layout == "bshd" else x.transpose(1, 2) if p.layout == "bhsd" else x.unflatten(-1, (p.heads, p.head_dim))
        out = torch.empty_like(bshd)
        for b, row in enumerate(np.asarray(feeds["position_ids"])):
            runs = np.split(np.arange(len(row)), np.flatnonzero(np.diff(row) != 1) + 1)
            for run in runs:
                tokens = bshd[b : b + 1, run[0] : run[-1] + 1].flatten(-2)
                out[b, run[0] : run[-1] + 1] = self.scaled(tokens, int(row[run[0]]))[0].transpose(0, 1)
        y = out if p.layout == "bshd" else out.transpose(1, 2) if p.layout == "bhsd" else out.flatten(-2)
        return y.numpy()


# The recipe's kind (posexport.models' roles) -> the session running the model's code for it.
SESSIONS = {
    "rope": RopeSession,
    "t5": T5Session,
    "mpnet-bias": MpnetBiasSession,
    "alibi": AlibiSession,
    "learned": LearnedSession,
    "patch-coordinates": PatchCoordinatesSession,
    "vit": VitSession,
    "swin": SwinSession,
    "swin-continuous": ContinuousBiasSession,
    "beit": BeitSession,
    "whisper-sinusoid": SinusoidTableSession,
    "roformer": RoformerSession,
    "sinusoid-table": SinusoidTableSession,
    "sinusoid-module": SinusoidModuleSession,
    "query-scale": QueryScaleSession,
    "llama4-temperature": Llama4TemperatureSession,
    "gptj": GptjSession,
    "vision-rope": VisionRopeSession,
    "grid-interpolate": GridInterpolateSession,
    "clvp-rope": ClvpRopeSession,
    "grid-sample": GridSampleSession,
    "naflex": NaflexSession,
    "navit": NavitSession,
}


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
        entry = self.entry(artifact)
        return SESSIONS[entry["hf"]["kind"]](artifact, entry)
