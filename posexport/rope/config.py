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
import math
from importlib import resources
from pathlib import Path
import re
from typing import Any

from . import scaling
from ..errors import ParamError, PosexportError, not_one_of, unknown
from ..params import json_mismatch
from ..registry import get_encoding

# config key -> rope parameter, for the scaling keys whose names differ.
CONFIG_KEYS = {"original_max_position_embeddings": "original_max_positions"}
PARAM_KEYS = {param: key for key, param in CONFIG_KEYS.items()}
# Older names of scalings still found in published configs (Phi-3's first release said "su").
LEGACY_TYPES = {"su": "longrope"}
# Keys of a rope_parameters / rope_scaling block that describe the block or plain rope, not the scaling.
BLOCK_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")
DEFAULT_BASE = 10000.0  # transformers' default rope_theta when a config omits it
PRESETS_PACKAGE = "posexport_graphs"
# JSON types of the keys read; a value of another type is an error, never coerced (`true` is no number).
KEY_TYPES: dict[str, Any] = {
    "num_attention_heads": int, "hidden_size": int, "head_dim": int, "max_position_embeddings": int,
    "original_max_position_embeddings": int, "rope_theta": float, "partial_rotary_factor": float,
    "rope_type": str, "type": str,
}
SCALING_TYPES: dict[str, Any] = {"original_max_positions": int, "truncate": bool,
                                 "short_factor": tuple[float, ...], "long_factor": tuple[float, ...]}
MAX_CONFIG_BYTES = 16 << 20  # a model's config.json is a few KiB
# Key names that speak of positions. The generic reader below takes only the keys it reads (KEY_TYPES and
# the scaling blocks); any other such key would be silently ignored, so it is an error instead.
POSITION_WORDS = re.compile(r"rope|rotary|posit|alibi|relative_attention|rel_pos|mrope|theta|n_ctx|max_seq")
READ_TOP_LEVEL = {"rope_scaling", "rope_parameters", *KEY_TYPES}


def config_key(param: str) -> str:
    return PARAM_KEYS.get(param, param)


def config_block(values: dict[str, Any]) -> dict[str, Any]:
    """A rope's scaling as a config's rope_parameters / rope_scaling block spells it (rope_type and its keys; {} for
    plain rope): what a patched model's config says of the rope it now computes."""
    kind = values.get("scaling", "default")
    if kind == "default":
        return {}
    block = {"rope_type": kind}
    for param in scaling.SCALINGS[kind].accepted:
        value = values.get(param)
        if value is not None and value != ():
            block[config_key(param)] = list(value) if isinstance(value, tuple) else value
    return block


def shown(value: Any) -> str:
    """A config value as the file spells it (inf and nan as Python does), cut short when long."""
    text = str(value) if isinstance(value, float) and not math.isfinite(value) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read(block: dict[str, Any], key: str, kind: Any, where: str, source: str) -> Any:
    """block[key] (None when absent or null), refused unless a JSON value of type ``kind``."""
    value = block.get(key)
    if value is not None:
        problem = json_mismatch(kind, value)
        if problem:
            raise PosexportError(f"{source}: {where}{key} = {shown(value)}: {problem}")
    return value


class Origins(dict):
    """rope parameter -> (the config key it came from, the value there), to report a refused parameter
    against the file's key (`config.json: rope_scaling.factor = inf`) and not a flag nobody typed."""

    def refuse(self, e: ParamError, source: str) -> PosexportError:
        if e.name not in self:
            return e
        key, value = self[e.name]
        return PosexportError(f"{source}: {key} = {value}: {e.allowed}")


BLOCK_NAMES = ("rope_parameters", "rope_scaling")  # transformers 5's name, then the older one
BOTH_BLOCKS = "the config also has rope_parameters; keep one of them"  # transformers silently takes rope_scaling


def block_type(block: dict[str, Any]) -> Any:
    """The rope type a block names: rope_type, else the older type, legacy names mapped ("su": longrope)."""
    kind = block.get("rope_type") if block.get("rope_type") is not None else block.get("type")
    return LEGACY_TYPES.get(kind, kind) if isinstance(kind, str) else kind


def scaling_block(cfg: dict[str, Any], source: str) -> tuple[str, dict[str, Any]]:
    """(block name, block) of rope_parameters or rope_scaling; ("", {}) for plain rope."""
    if all(cfg.get(name) is not None for name in BLOCK_NAMES):
        raise PosexportError(f"{source}: rope_scaling = {shown(cfg['rope_scaling'])}: {BOTH_BLOCKS}")
    for name in BLOCK_NAMES:
        block = cfg.get(name)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise PosexportError(f"{source}: {name} must be an object with rope_type and its keys, got {shown(block)}")
        return name, block
    return "", {}


def scaling_kind(block_name: str, block: dict[str, Any], source: str) -> str:
    """The scaling a block names (rope_type, or the older type), checked against the known ones."""
    read(block, "rope_type", str, f"{block_name}.", source)
    read(block, "type", str, f"{block_name}.", source)
    kind = block_type(block)
    if kind is None:
        if set(block) - set(BLOCK_KEYS):
            raise PosexportError(f"{source}: {block_name} has no rope_type (or type); choose one of {', '.join(scaling.SCALINGS)}")
        kind = "default"
    if kind not in scaling.SCALINGS:
        raise PosexportError(f"{source}: {block_name}.rope_type {kind!r}: {not_one_of(kind, list(scaling.SCALINGS), 'scaling')}")
    return kind


# Scalings whose block takes original_max_position_embeddings, max_position_embeddings when absent (transformers).
WITH_ORIGINAL = ("llama3", "yarn", "longrope")


def implicit_values(block: dict[str, Any], block_name: str, source: str, max_positions: int,
                    original: int | None = None) -> dict[str, Any]:
    """The block with transformers' implicit values written out (modeling_rope_utils' standardize_rope_params and
    rope init functions), so that --from-config and --from-model read one block alike: llama3, yarn and longrope
    take ``original``, a pre-extension length written outside the block (a top-level
    original_max_position_embeddings, which wins as transformers lets it), else the block's, else
    max_position_embeddings; yarn without factor (or with null, as DeepSeek's code reads it) takes
    max_position_embeddings / L0; longrope's factor s sets only the attention factor, √(1 + ln s / ln L0) for s > 1
    (1 otherwise), unless attention_factor is written."""
    kind, block = block_type(block), dict(block)
    factor = read(block, "factor", float, f"{block_name}.", source)
    if kind not in WITH_ORIGINAL:
        return block
    read(block, "original_max_position_embeddings", int, f"{block_name}.", source)
    if original is not None or block.get("original_max_position_embeddings") is None:
        block["original_max_position_embeddings"] = original or max_positions
    length = block["original_max_position_embeddings"]
    if kind == "yarn" and factor is None:
        block["factor"] = max_positions / length
    if kind == "longrope" and factor is not None:
        del block["factor"]
        if block.get("attention_factor") is None and length > 1:
            block["attention_factor"] = math.sqrt(1 + math.log(factor) / math.log(length)) if factor > 1 else 1.0
    return block


def scaling_values(cfg: dict[str, Any], block_name: str, block: dict[str, Any], source: str,
                   origins: Origins | None = None) -> dict[str, Any]:
    """The scaling's rope parameters from its block, every key checked against the scaling's own list
    and its JSON type; ``origins``, when given, is told which key each came from."""
    origins = Origins() if origins is None else origins
    if not block_name:
        return {}
    kind = scaling_kind(block_name, block, source)
    spec = scaling.SCALINGS[kind]
    takes = ", ".join(config_key(p) for p in spec.accepted) or "no keys"
    values: dict[str, Any] = {"scaling": kind}
    for key in block:
        if key in BLOCK_KEYS or block[key] is None:
            continue
        param = CONFIG_KEYS.get(key, key)
        if param not in spec.accepted:
            raise PosexportError(f"{source}: {block_name} key {key!r} is not a key of the {kind} scaling, which takes {takes}")
        values[param] = read(block, key, SCALING_TYPES.get(param, float), f"{block_name}.", source)
        origins[param] = (f"{block_name}.{key}", shown(block[key]))
    for param in spec.required:
        if param not in values:
            raise PosexportError(f"{source}: {block_name} of the {kind} scaling needs key {config_key(param)!r}")
    return values


def required(cfg: dict[str, Any], key: str, source: str, hint: str = "") -> int:
    """A required integer key, ≥ 1."""
    value = read(cfg, key, int, "", source)
    if value is None:
        raise PosexportError(f"{source}: missing key {key!r}{hint}")
    if value < 1:
        raise PosexportError(f"{source}: {key} = {shown(value)}: must be ≥ 1")
    return value


def sizes(cfg: dict[str, Any], source: str, origins: Origins) -> dict[str, Any]:
    """heads, head_dim and max_positions from the config's keys."""
    heads = required(cfg, "num_attention_heads", source)
    origins["heads"] = ("num_attention_heads", shown(heads))
    if read(cfg, "head_dim", int, "", source) is not None:
        head_dim = required(cfg, "head_dim", source)
        origins["head_dim"] = ("head_dim", shown(head_dim))
    else:
        hidden = required(cfg, "hidden_size", source, " (or 'head_dim')")
        head_dim = hidden // heads
        origins["head_dim"] = ("hidden_size / num_attention_heads", f"{hidden} / {heads}")
    max_positions = required(cfg, "max_position_embeddings", source)
    origins["max_positions"] = ("max_position_embeddings", shown(max_positions))
    return {"head_dim": head_dim, "heads": heads, "max_positions": max_positions}


def rope_values(cfg: dict[str, Any], source: str = "config", origins: Origins | None = None) -> dict[str, Any]:
    """Raw rope parameters (as `posexport build` options take them) from a model config dict; ``origins``
    is filled with the config key each one came from."""
    origins = Origins() if origins is None else origins
    if not isinstance(cfg, dict):
        raise PosexportError(f"{source}: a model config is a JSON object")
    refuse_unread_position_keys(cfg, source)
    block_name, block = scaling_block(cfg, source)
    values = sizes(cfg, source, origins)
    where = f"{block_name}." if "rope_theta" in block else ""
    base = read(block if where else cfg, "rope_theta", float, where, source)
    values["base"] = DEFAULT_BASE if base is None else base
    origins["base"] = (f"{where}rope_theta", shown(values["base"]))
    where = f"{block_name}." if "partial_rotary_factor" in block else ""
    partial = read(block if where else cfg, "partial_rotary_factor", float, where, source)
    top = read(cfg, "original_max_position_embeddings", int, "", source)  # Phi-3 keeps it at the top level
    block = implicit_values(block, block_name, source, values["max_positions"], top) if block_name else block
    values.update(scaling_values(cfg, block_name, block, source, origins))
    if top is not None and "original_max_positions" in values:
        origins["original_max_positions"] = ("original_max_position_embeddings", shown(top))
    if partial is not None:
        if not 0 < partial <= 1:
            raise PosexportError(f"{source}: {where}partial_rotary_factor = {shown(partial)}: must be a number in (0, 1]")
        param, value = partial_rotary(values, partial)
        values[param] = value
        origins[param] = (f"{where}partial_rotary_factor", shown(partial))
    return values


def partial_rotary(values: dict[str, Any], partial: float) -> tuple[str, Any]:
    """What partial_rotary_factor sets: the rotary width int(head_dim · factor), or, for the proportional
    scaling (Gemma-4), the fraction of frequencies that turn over the whole head (transformers' rope
    functions read it so)."""
    if values.get("scaling") == "proportional":
        return "proportion", partial
    return "rotary_dim", int(values["head_dim"] * partial)


def refuse_unread_position_keys(cfg: dict[str, Any], source: str) -> None:
    """A key about positions that this reader does not take (GPT-NeoX's rotary_pct, a model's own spelling)
    would be ignored: refuse it, pointing at the reader that knows the architecture."""
    for key, value in cfg.items():
        if key not in READ_TOP_LEVEL and value is not None and POSITION_WORDS.search(key):
            raise PosexportError(f"{source}: {key} = {shown(value)}: a rope config key --from-config does not read; "
                                 "build from the model folder with --from-model DIR, which reads each architecture's own keys")


def checked_values(cfg: Any, source: str) -> dict[str, Any]:
    """rope_values, validated as rope parameters: a refused value names its key in the config."""
    origins = Origins()
    values = rope_values(cfg, source, origins)
    try:
        get_encoding("rope").params(**values)
    except ParamError as e:
        raise origins.refuse(e, source) from None
    return values


def read_json(path: Path, what: str) -> Any:
    """A JSON file's value; a file that is not JSON text (binary, too large, nested too deep) is one error."""
    try:
        # Imported here: the guarded reader pulls in onnx, which `posexport list` and --help never load.
        from ..guarded import read_bytes

        data = read_bytes(path, max_bytes=MAX_CONFIG_BYTES)  # a regular file: a FIFO never blocks it
    except PosexportError as e:
        raise PosexportError(f"{what} {e}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PosexportError(f"{what} {path}: not JSON (not UTF-8 text: a binary file?)") from None
    except json.JSONDecodeError as e:
        raise PosexportError(f"{what} {path}: not JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise PosexportError(f"{what} {path}: not JSON posexport reads (nested too deeply)") from None
    except ValueError as e:  # an integer literal too long to convert, say
        raise PosexportError(f"{what} {path}: not JSON posexport reads ({e})") from None


def from_config_file(path: str | Path) -> dict[str, Any]:
    """Rope parameters from a config.json on disk."""
    path = Path(path)
    return checked_values(read_json(path, "--from-config"), str(path))


def presets_dir() -> Any:
    return resources.files(PRESETS_PACKAGE) / "presets"


def preset_names() -> list[str]:
    return sorted(p.name[: -len(".json")] for p in presets_dir().iterdir() if p.name.endswith(".json"))


def preset_config(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise PosexportError(unknown("--preset", name, "preset", preset_names()))
    return json.loads((presets_dir() / f"{name}.json").read_text())


def from_preset(name: str) -> dict[str, Any]:
    """Rope parameters of a bundled preset."""
    return checked_values(preset_config(name), f"preset {name}")


def describe_presets() -> list[tuple[str, str, str]]:
    """(name, scaling, model it follows) for `posexport list`."""
    rows = []
    for name in preset_names():
        cfg = preset_config(name)
        rows.append((name, rope_values(cfg, name).get("scaling", "default"), cfg.get("_name_or_path", "")))
    return rows
