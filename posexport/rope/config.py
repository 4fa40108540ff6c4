"""Rope parameters from a model's config.json and the bundled presets
(docs/encodings.md, RoPE › Model configs and presets).

Read from the config: rope_theta, head_dim (or hidden_size / num_attention_heads), num_attention_heads,
partial_rotary_factor, max_position_embeddings, and the scaling in `rope_scaling` or `rope_parameters`
(transformers' newer spelling, which may also carry rope_theta and partial_rotary_factor), whose kind is
`rope_type` or the older `type`. A scaling key the scaling does not take, or a key it needs that is
missing, is an error naming the key and the scaling. Other top-level keys of the config are not ours and
are ignored.

Presets are such configs, written from published model values, shipped in graphs/presets/NAME.json.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from . import scaling
from ..errors import PosexportError

# config key -> rope parameter, for the scaling keys whose names differ.
CONFIG_KEYS = {"original_max_position_embeddings": "original_max_positions"}
PARAM_KEYS = {param: key for key, param in CONFIG_KEYS.items()}
# Older names of scalings still found in published configs (Phi-3's first release said "su").
LEGACY_TYPES = {"su": "longrope"}
# Keys of a rope_parameters / rope_scaling block that describe the block or plain rope, not the scaling.
BLOCK_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")
DEFAULT_BASE = 10000.0  # transformers' default rope_theta when a config omits it
PRESETS_PACKAGE = "posexport_graphs"


def config_key(param: str) -> str:
    return PARAM_KEYS.get(param, param)


def scaling_block(cfg: dict[str, Any], source: str) -> tuple[str, dict[str, Any]]:
    """(block name, block) of rope_parameters or rope_scaling; ("", {}) for plain rope."""
    for name in ("rope_parameters", "rope_scaling"):
        block = cfg.get(name)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise PosexportError(f"{source}: {name} must be an object with rope_type and its keys, got {block!r}")
        return name, block
    return "", {}


def scaling_values(cfg: dict[str, Any], block_name: str, block: dict[str, Any], source: str) -> dict[str, Any]:
    """The scaling's rope parameters from its block, every key checked against the scaling's own list."""
    if not block_name:
        return {}
    kind = block.get("rope_type", block.get("type"))
    if kind is None:
        if set(block) - set(BLOCK_KEYS):
            raise PosexportError(f"{source}: {block_name} has no rope_type (or type); choose one of {', '.join(scaling.SCALINGS)}")
        kind = "default"
    kind = LEGACY_TYPES.get(kind, kind)
    if kind not in scaling.SCALINGS:
        raise PosexportError(f"{source}: {block_name}.rope_type {kind!r} is not a scaling posexport knows; choose one of {', '.join(scaling.SCALINGS)}")
    spec = scaling.SCALINGS[kind]
    takes = ", ".join(config_key(p) for p in spec.accepted) or "no keys"
    values: dict[str, Any] = {"scaling": kind}
    for key, value in block.items():
        if key in BLOCK_KEYS or value is None:
            continue
        param = CONFIG_KEYS.get(key, key)
        if param not in spec.accepted:
            raise PosexportError(f"{source}: {block_name} key {key!r} is not a key of the {kind} scaling, which takes {takes}")
        values[param] = value
    # Phi-3 keeps the pre-extension length at the top level of the config.
    if "original_max_positions" in spec.accepted and "original_max_positions" not in values:
        if cfg.get("original_max_position_embeddings") is not None:
            values["original_max_positions"] = cfg["original_max_position_embeddings"]
    for param in spec.required:
        if param not in values:
            raise PosexportError(f"{source}: {block_name} of the {kind} scaling needs key {config_key(param)!r}")
    return values


def rope_values(cfg: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Raw rope parameters (as `posexport build` options take them) from a model config dict."""
    if not isinstance(cfg, dict):
        raise PosexportError(f"{source}: a model config is a JSON object")
    block_name, block = scaling_block(cfg, source)
    heads = cfg.get("num_attention_heads")
    if heads is None:
        raise PosexportError(f"{source}: missing key 'num_attention_heads'")
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        if cfg.get("hidden_size") is None:
            raise PosexportError(f"{source}: missing key 'head_dim' (or 'hidden_size' with 'num_attention_heads')")
        head_dim = cfg["hidden_size"] // heads
    if cfg.get("max_position_embeddings") is None:
        raise PosexportError(f"{source}: missing key 'max_position_embeddings'")
    values: dict[str, Any] = {
        "head_dim": head_dim,
        "heads": heads,
        "base": block.get("rope_theta", cfg.get("rope_theta", DEFAULT_BASE)),
        "max_positions": cfg["max_position_embeddings"],
    }
    partial = block.get("partial_rotary_factor", cfg.get("partial_rotary_factor"))
    if partial is not None:
        if not (isinstance(partial, (int, float)) and 0 < partial <= 1):
            raise PosexportError(f"{source}: partial_rotary_factor {partial!r} must be a number in (0, 1]")
        values["rotary_dim"] = int(head_dim * partial)
    values.update(scaling_values(cfg, block_name, block, source))
    return values


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise PosexportError(f"{what} {path}: cannot read it ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise PosexportError(f"{what} {path}: not JSON ({e.msg} at line {e.lineno})") from None


def from_config_file(path: str | Path) -> dict[str, Any]:
    """Rope parameters from a config.json on disk."""
    path = Path(path)
    return rope_values(read_json(path, "--from-config"), str(path))


def presets_dir() -> Any:
    return resources.files(PRESETS_PACKAGE) / "presets"


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".json")] for p in presets_dir().iterdir() if p.name.endswith(".json"))


def preset_config(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise PosexportError(f"--preset {name!r}: no such preset; choose one of {', '.join(preset_names())}")
    return json.loads((presets_dir() / f"{name}.json").read_text())


def from_preset(name: str) -> dict[str, Any]:
    """Rope parameters of a bundled preset."""
    return rope_values(preset_config(name), f"preset {name}")


def describe_presets() -> list[tuple[str, str, str]]:
    """(name, scaling, model it follows) for `posexport list`."""
    rows = []
    for name in preset_names():
        cfg = preset_config(name)
        rows.append((name, rope_values(cfg, name).get("scaling", "default"), cfg.get("_name_or_path", "")))
    return rows
