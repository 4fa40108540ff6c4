"""The exact positional encoding of a published model, read from its folder (config.json and, where the
encoding has trained tables, its weights) the way transformers reads it.

    plan = read_model("path/to/model")      # ModelPlan: the model's distinct encodings ("roles")
    built = build_model(plan)              # one Artifact per role (posexport.models.build)

Each architecture family is one module exporting FAMILY (the types it reads, its reader, its catalogue line, its
pending reasons, its transformers sessions), registered by one line in families.py; rope decoders are one line each
in decoders.py. Every config key that speaks of positions is read or is an error naming it (config.py).
"""

from __future__ import annotations

from pathlib import Path

import difflib

from ..errors import PosexportError
from ..registry import get_encoding
from ..upstream import CHECKED_TRANSFORMERS, installed_transformers, versions_note
from . import config
from .families import BY_TYPE, NOT_YET, NO_POSITIONS, READERS
from .plan import LINEAR_ATTENTION, ModelPlan, Role, has_attention


def supported_architectures() -> list[str]:
    return sorted(READERS)


def read_model(folder: str | Path) -> ModelPlan:
    """The model's distinct encodings, or one error line naming what posexport cannot read exactly."""
    folder = Path(folder)
    data = config.load(folder)
    source = str(folder / "config.json")
    architecture = data.get("model_type")
    if not isinstance(architecture, str):
        raise PosexportError(f"{source}: no model_type (a string naming the architecture, as transformers writes it); "
                             "`posexport list --models` shows the types posexport reads")
    if architecture not in READERS:
        raise PosexportError(f"{source}: {not_read(architecture)}")
    cfg = config.ModelConfig(data, architecture, source, folder, catalogue=config.Catalogue(BY_TYPE, not_read))
    roles = BY_TYPE[architecture].read(cfg)
    cfg.check_all_read()
    for role in roles:
        judged(role, source)
    count, without, linear = layer_info(data)
    return ModelPlan(architecture, folder, tuple(roles), count, without, linear)


def not_read(architecture: str) -> str:
    """Why posexport reads no encoding from this model_type, in one line: no positional encoding, not read yet
    (and why), new to posexport (a transformers release newer than the one it was checked against), or no
    transformers type at all (and the nearest one posexport reads)."""
    if architecture in NO_POSITIONS:
        return f"model_type {architecture!r} has no positional encoding to build: {NO_POSITIONS[architecture]}"
    if architecture in NOT_YET:
        return f"model_type {architecture!r} is not read yet: {NOT_YET[architecture]}"
    if transformers_registers(architecture):
        return (f"model_type {architecture!r} is new to posexport: transformers {installed_transformers()} registers it; "
                f"posexport's catalogue, checked against transformers {CHECKED_TRANSFORMERS}, does not know it "
                "(`posexport list --models` shows what it reads)")
    near = difflib.get_close_matches(architecture, READERS, n=1)
    return (f"model_type {architecture!r} is not a transformers model type posexport knows"
            f"{f' (did you mean {near[0]!r}?)' if near else ''}; {versions_note()}; `posexport list --models` shows "
            "the types it reads")


def transformers_registers(architecture: str) -> bool:
    """Whether the installed transformers (if any) has a config class for this model_type."""
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return False
    return architecture in CONFIG_MAPPING


def judged(role: Role, source: str) -> None:
    """A role's values judged as `build` judges them (the encoding's own parameter checks), so that
    doctor, patch, --against-hf and build refuse one config with the same words."""
    try:
        get_encoding(role.encoding).params(**role.values)
    except PosexportError as e:
        raise PosexportError(f"{source}: {role.role}: {e}") from None


def griffin_types(config: dict, count: int) -> list[str] | None:
    """RecurrentGemma's layer types as its config class names them: block_types cycled over the layers, its
    recurrent blocks linear_attention and its attention blocks sliding_attention."""
    kinds = config.get("block_types")
    if not isinstance(kinds, list) or not kinds:
        return None
    return ["linear_attention" if kinds[i % len(kinds)] == "recurrent" else "sliding_attention" for i in range(count)]


def layer_info(data: dict) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """num_hidden_layers (GPT-J: n_layer; a Qwen-VL vision tower's own config: depth) of the config or of its text_config (0 when neither says), the layers its
    layer_types names as something other than attention (LFM2's conv layers, Mamba layers), and its
    linear-attention layers."""
    for part in (data, data.get("text_config")):
        count = (part.get("num_hidden_layers") or part.get("n_layer") or part.get("depth")) if isinstance(part, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            types = part.get("layer_types") or part.get("layers_block_type") or griffin_types(part, count)
            if isinstance(types, list) and "mlp" in types:  # Dory's (attention, mlp) block pairs
                types, count = types[::2], count // 2
            types = [t if isinstance(t, str) else "" for t in types] if isinstance(types, list) and len(types) == count else []
            return (count, tuple(i for i, t in enumerate(types) if not has_attention(t)),
                    tuple(i for i, t in enumerate(types) if t == LINEAR_ATTENTION))
    return 0, (), ()
