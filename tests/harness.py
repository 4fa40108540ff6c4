"""What the model tests share: the one error formula, a tiny model of any registry type (its config, or the model
with its weights), and judging a role against the model's own code (the hf runtime's session on random feeds,
against the encoding's float64 reference) or a misread of it (a graph with one value changed, which the model's
code must fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import zoo
from posexport.contract import Case
from posexport.dtypes import DTYPES
from posexport.models import learned, oracle, read_model
from posexport.models.cli import build as cli_build
from posexport.models.oracle import model_bound, recipe_problem
from posexport.registry import get_encoding
from posexport.verdicts.from_model import run_model_parity


def normalised_error(out: np.ndarray, ref: np.ndarray) -> float:
    """The parity error: max|out − ref| / max(1, max|ref|) (docs/numerics.md), in float64."""
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def own_model(config: Any) -> Any:
    """transformers' model of a config: AutoModel's, else (a tower with no AutoModel entry) the class of
    its modeling module (a text or audio tower, a Q-Former) made for this config class."""
    import importlib
    import inspect

    from transformers import AutoModel
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    try:
        return AutoModel.from_config(config)
    except ValueError:
        name = model_type_to_module_name(config.model_type)
        module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
        (cls,) = [c for n, c in vars(module).items() if inspect.isclass(c) and n.endswith(("TextModel", "AudioModel", "QFormerModel"))
                  and getattr(c, "config_class", None) is type(config)]
        return cls(config)


def with_weights(model_type: str, folder: Path, **overrides: Any) -> Path:
    """A tiny model of the type with its random weights (seed 0), saved by transformers in ``folder``."""
    import torch
    from transformers import AutoConfig

    zoo.tiny(model_type, folder, **overrides)
    torch.manual_seed(0)
    own_model(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    return folder


class Built:
    """What the hf sessions read of a built graph (its parameters, encoding and model entry), without
    exporting an ONNX graph: the walk checks the model's code against the float64 reference only."""

    def __init__(self, encoding, params, entry):
        self.encoding, self.params, self.manifest = encoding, params, {"model": entry}


def registry_types() -> list[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return sorted(CONFIG_MAPPING_NAMES)


GRIDS = ((6, 6), (3, 5), (11, 8), (1, 1))  # a grid encoding's trained grid, down, up and one patch


def feeds_for(encoding, p, rng, grids=GRIDS):
    """17 tokens at 0, from 5000, and (for a query scale) across its third step; a grid encoding at its grids."""
    if encoding.family == "vision":
        return [encoding.feeds(p, Case(f"{h}x{w}", {"batch": 2, "grid_h": h, "grid_w": w}), DTYPES["float32"], rng)
                for h, w in grids]
    starts = [0, 5000] + ([3 * p.floor_scale - 8] if encoding.name == "query-scale" else [])
    return [encoding.feeds(p, Case(f"at{s}", {"batch": 2, "seq": 17}, start=s), DTYPES["float32"], rng) for s in starts]


START = {learned.FROM_ZERO: lambda cfg: 0, learned.FROM_PADDING: lambda cfg: cfg.pad_token_id + 1, learned.FROM_TWO: lambda cfg: 2}


def bias_roles_agree_with_hf(plan, rng: np.random.Generator, scores_shape: tuple[int, ...]) -> None:
    """Every role of ``plan`` (attention biases) through the hf runtime's session, which runs the model's own
    bias code, against the encoding's float64 reference on random scores."""
    for role in plan.roles:
        encoding = get_encoding(role.encoding)
        p = encoding.params(**role.values)
        assert recipe_problem(plan.manifest_entry(role)) == ""  # the hf runtime accepts the recipe
        session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
        feeds = {"scores": rng.standard_normal(scores_shape).astype(np.float32)}
        assert np.max(np.abs(session.run(feeds) - encoding.reference(p, feeds))) < 1e-5, role.role


def submodule(model, path):
    try:
        return model.get_submodule(path)
    except AttributeError:
        return None


def built_graph_passes_parity_from_model(folder: Path, tmp_path: Path):
    """The folder's one graph built as a user builds it passes `parity --from-model` (ort-cpu and hf); its report."""
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    (graph,) = sorted((tmp_path / "built").glob("*.onnx"))
    report = run_model_parity(folder, graph, ["ort-cpu"], batches=(2,), properties=False)
    bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
    assert not bad and any(r.runtime == "hf" for r in report.results), bad
    return report


def misread_statuses(folder: Path, tmp_path: Path, values: dict) -> tuple[dict[str, str], dict[str, tuple[int, int]]]:
    """A vit-learned graph built from misread ``values``, judged against the model: each case's hf status and grid."""
    from posexport import export

    wrong, _ = export.save(export.build("vit-learned", values, backend="portable"), tmp_path, "misread")
    report = run_model_parity(folder, wrong, ["ort-cpu"], batches=(2,), properties=False)
    hf = [r for r in report.results if r.runtime == "hf"]
    return {r.case: r.status for r in hf}, {r.case: (r.axes["grid_h"], r.axes["grid_w"]) for r in hf}


def model_inputs(model, config, tokens):
    """The forward's inputs for 9 tokens: input_ids (input_features for Speech2Text's encoder), and the same
    tokens for an encoder-decoder's decoder."""
    import inspect

    import torch

    inputs = {"input_ids": tokens}
    if "input_features" in inspect.signature(model.forward).parameters:
        features = config.input_feat_per_channel * config.input_channels
        inputs = {"input_features": torch.zeros(1, 4 * 9, features)}  # two stride-2 convolutions: 9 frames
    return {**inputs, **({"decoder_input_ids": tokens} if config.is_encoder_decoder else {})}


def rows_the_table_adds(model, table: str, folder: Path, **inputs) -> np.ndarray:
    """The rows the model's table module ``table`` adds on a forward of ``inputs`` (batch row 0), the table made
    random and saved in the folder's checkpoint under `<table>.weight`."""
    import torch

    module = model.get_submodule(table)
    module.weight.data = torch.from_numpy(zoo.table_checkpoint(folder, f"{table}.weight", tuple(module.weight.shape)))
    added = []
    module.register_forward_hook(lambda _m, _a, rows: added.append(rows[0].double().numpy()))
    with torch.no_grad():
        model(**inputs)
    return added[0]


def rope_roles_agree_with_hf(plan, roles, rng, misread=None):
    """Each rope role's reference against its hf session (the model's own rotary and apply function); with
    ``misread`` (values to change), every case misses instead."""
    for role in roles:
        encoding, entry = get_encoding(role.encoding), plan.manifest_entry(role)
        p = encoding.params(**{**role.values, **(misread or {})})
        assert recipe_problem(entry) == ""  # the hf runtime accepts the recipe
        session = oracle.session(Built(encoding, p, entry), entry)
        bound = model_bound(DTYPES["float32"].bound(5016), 5016)
        for feeds in feeds_for(encoding, p, rng):
            exact = encoding.reference(p, feeds)
            error = normalised_error(session.run(feeds), exact)
            assert (error > 100 * bound) if misread else (error < bound), (role.role, error)


def model_frequencies(session, role) -> tuple[np.ndarray, float]:
    """The model's inverse frequencies and attention factor: its rotary module's buffers, or (GPT-J,
    CodeGen, RoFormer) the angles of its sinusoid table's row for position 1."""
    if role.hf.kind in ("gptj", "roformer"):
        row = session.create(2, session.p.rotary_dim)[1].double().numpy()
        half = session.p.rotary_dim // 2
        return np.arctan2(row[:half], row[half:]), 1.0
    prefix = f"{role.hf.layer_type}_" if role.hf.layer_type else ""
    return getattr(session.rotary, f"{prefix}inv_freq").double().numpy(), getattr(session.rotary, f"{prefix}attention_scaling")


def rotations_in_transformers(folder: Path) -> list[tuple[tuple[int, ...], object] | None]:
    """Per decoder layer, the shape of the q transformers' own model hands its apply function there and the
    third argument (cos, or Llama-4's complex frequencies) for positions 0-4 (None: never called): a forward
    on 5 tokens with the module's apply function wrapped to note the layer it runs in."""
    import importlib

    import torch
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(folder)
    recipe = read_model(folder).roles[0].hf
    module = importlib.import_module(recipe.module)
    try:
        model = AutoModel.from_config(config).eval()
    except ValueError:  # a text model no auto class maps (Mllama's): the module's <Prefix>TextModel
        model = getattr(module, recipe.rotary.replace("RotaryEmbedding", "TextModel"))(config).eval()
    # A multimodal model's decoder layers are its language model's (Mllama).
    layers, current, rotating = getattr(model, "layers", None) or model.language_model.layers, [None], {}
    apply = getattr(module, recipe.apply)

    def noted(*args, **kwargs):
        rotating[current[0]] = tuple(args[0].shape), args[2]
        return apply(*args, **kwargs)

    hooks = [layer.register_forward_pre_hook(lambda _m, _a, i=i: current.__setitem__(0, i)) for i, layer in enumerate(layers)]
    setattr(module, recipe.apply, noted)
    try:
        with torch.no_grad():
            model(input_ids=torch.arange(1, 6)[None])
    finally:
        setattr(module, recipe.apply, apply)
        for hook in hooks:
            hook.remove()
    return [rotating.get(i) for i in range(len(layers))]


def processor_patches(config, rows: int, columns: int, padding: int, rng) -> np.ndarray:
    """flattened_patches [1, rows · columns + padding, 2 + patch_embed_hidden_size] as the image processors lay them
    out: 1-based row and column ids in raster order, random patches, then all-zero padding patches."""
    row_ids, column_ids = np.divmod(np.arange(rows * columns), columns)
    patches = np.concatenate([row_ids[:, None] + 1, column_ids[:, None] + 1,
                              rng.standard_normal((rows * columns, config.patch_embed_hidden_size))], axis=1)
    return np.concatenate([patches, np.zeros((padding, patches.shape[1]))])[None].astype(np.float32)
