"""Validated parameter dataclasses, shared by every encoding.

Each encoding's ``Params`` is a frozen dataclass whose fields carry a help text (and, for choices, the
allowed values) in their metadata. ``__post_init__`` validates with :func:`check`, so an invalid object
never exists. The CLI turns every field into an option (``head_dim`` -> ``--head-dim``) through
:func:`parse_options`; a bool field is a flag pair (``--causal/--no-causal``), and ``--causal false``
still works. Nothing else needs to know an encoding's fields.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from .errors import ParamError, PosexportError, UnknownOption, not_one_of

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def param(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field with its help text and, optionally, the values it accepts."""
    metadata = {"help": help, "choices": choices}
    if isinstance(default, (list, dict, set)):
        raise TypeError("parameters are immutable: use a tuple")
    return dataclasses.field(default=default, metadata=metadata)


def check(ok: bool, name: str, value: object, allowed: str) -> None:
    if not ok:
        raise ParamError(name, value, allowed)


def check_seed(params: Any) -> None:
    """A table's seed is what numpy's generator takes: an integer in [0, 2^63)."""
    seed = params.seed
    check(isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 1 << 63, "seed", seed, "must be an integer in [0, 2^63)")


def check_choices(params: Any) -> None:
    """Validate every field that declares choices."""
    for f in dataclasses.fields(params):
        choices = f.metadata.get("choices")
        value = getattr(params, f.name)
        if choices and value not in choices:
            raise ParamError(f.name, value, not_one_of(value, choices, f.name.replace("_", " ")))


def _base_type(annotation: Any) -> Any:
    """`int | None` -> int; tuple[float, ...] stays a tuple annotation."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0]
    return annotation


def field_type(cls: type, name: str) -> Any:
    hints = typing.get_type_hints(cls)
    return _base_type(hints[name])


def convert(cls: type, name: str, raw: Any) -> Any:
    """Turn a CLI string (or a JSON value) into the field's type, with a one-line error on failure."""
    kind = field_type(cls, name)
    if raw is None:
        return None
    if isinstance(raw, bool) and kind is not bool:  # a bare --name (a flag) for a parameter that takes a value
        raise ParamError(name, raw, f"needs a value: {describe_type(kind)}")
    try:
        if typing.get_origin(kind) is tuple:
            (item,) = {a for a in typing.get_args(kind) if a is not Ellipsis}
            items = raw.split(",") if isinstance(raw, str) else raw
            return tuple(item(x) for x in items)
        if kind is bool:
            return to_bool(raw)
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError(raw)
        return kind(raw)
    except (TypeError, ValueError):
        raise ParamError(name, raw, f"expected {describe_type(kind)}") from None


def json_mismatch(kind: Any, raw: Any) -> str | None:
    """What is wrong with ``raw``, a value read from a JSON file, for a field of type ``kind``; None when
    it fits. The strict path: a file's values are never coerced (``true`` is no number, ``"2.0"`` no
    float), numbers must be finite and integers integral JSON numbers. CLI strings go through
    :func:`convert` instead."""
    if typing.get_origin(kind) is tuple:
        if not isinstance(raw, list):
            return "must be a list of numbers"
        return next((f"item {i}: {bad}" for i, v in enumerate(raw) if (bad := json_mismatch(float, v))), None)
    if kind is bool:
        return None if isinstance(raw, bool) else "must be true or false"
    if kind is str:
        return None if isinstance(raw, str) else "must be a string"
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return f"must be {describe_type(kind)}, not {json_kind(raw)}"
    if not math.isfinite(raw):
        return "must be a finite number"
    return "must be an integer" if kind is int and not isinstance(raw, int) else None


def json_kind(raw: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    kinds = ((bool, "a boolean"), (str, "a string"), (list, "a list"), (dict, "an object"), (type(None), "null"))
    return next((name for cls, name in kinds if isinstance(raw, cls)), "a number")


def to_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if str(raw).lower() in TRUE_WORDS:
        return True
    if str(raw).lower() in FALSE_WORDS:
        return False
    raise ValueError(raw)


def describe_type(kind: Any) -> str:
    if typing.get_origin(kind) is tuple:
        return "a comma-separated list of numbers"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(kind, str(kind))


def build(cls: type, values: dict[str, Any]) -> Any:
    """Construct ``cls`` from raw values; unknown names are an error that lists the known ones."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        options = ["--" + n.replace("_", "-") for n in sorted(known)]
        raise UnknownOption(unknown[0], options, detail=f"this encoding takes {', '.join(options)}")
    return cls(**{k: convert(cls, k, v) for k, v in values.items()})


def parse_options(args: list[str]) -> dict[str, Any]:
    """`['--head-dim', '64', '--flag=x', '--causal', '--no-bidirectional']` ->
    {'head_dim': '64', 'flag': 'x', 'causal': True, 'bidirectional': False}.

    An option followed by another option (or by nothing) is a flag: ``--name`` means True and ``--no-name``
    False (typer's convention); ``--name true|false`` keeps working. Values are checked against each
    field's type when the parameters are built.
    """
    values: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or len(arg) == 2:
            raise ParamError("option", arg, "expected --name value")
        name, eq, value = arg[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            values[key] = value
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            values[key] = args[i + 1]
            i += 1
        elif key.startswith("no_") and len(key) > 3:
            values[key[3:]] = False
        else:
            values[key] = True
        i += 1
    return values


def parse_ints(text: str | None, option: str) -> tuple[int, ...] | None:
    """`--seqs 1,17,512` -> (1, 17, 512); empty -> None."""
    if not text:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise PosexportError(f"{option} {text!r}: expected comma-separated positive integers, e.g. 1,17,512") from None
    if any(v < 1 for v in values):
        raise PosexportError(f"{option} {text!r}: every value must be ≥ 1")
    return values


def describe(cls: type) -> list[tuple[str, str, str]]:
    """(option, default, help) for every field, for `posexport build --encoding NAME --help`; a bool
    field reads `--name/--no-name`."""
    rows = []
    for f in dataclasses.fields(cls):
        default = f.default
        if isinstance(default, tuple):
            default = ",".join(str(v) for v in default) or "()"
        help_text = f.metadata.get("help", "")
        if f.metadata.get("choices"):
            help_text += f" ({'|'.join(f.metadata['choices'])})"
        option = "--" + f.name.replace("_", "-")
        if field_type(cls, f.name) is bool:
            option += f"/--no-{f.name.replace('_', '-')}"
        rows.append((option, str(default), help_text))
    return rows


def to_dict(params: Any) -> dict[str, Any]:
    return {f.name: _jsonable(getattr(params, f.name)) for f in dataclasses.fields(params)}


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
