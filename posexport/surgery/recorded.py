"""The position limits a patch chose on request (a cache grown past its rows, a learned table extended), recorded in
the model's metadata so that the doctor reports them as chosen, not as a fault."""

from __future__ import annotations

import json

import onnx

from ..errors import PosexportError

METADATA_KEY = "posexport.position_limits"


def chosen_limits(model: onnx.ModelProto) -> dict[str, int]:
    """Cache names whose rows a posexport patch chose on request (recorded in the model's metadata)."""
    for entry in model.metadata_props:
        if entry.key == METADATA_KEY:
            try:
                limits = json.loads(entry.value)
            except (ValueError, RecursionError):
                limits = None
            if not (isinstance(limits, dict) and all(type(v) is int and v > 0 for v in limits.values())):
                raise PosexportError(f"the model's {METADATA_KEY} metadata {entry.value[:60]!r} is not the object of "
                                     "cache rows posexport patch records; remove it")
            return limits
    return {}


def record_limit(model: onnx.ModelProto, cache: str, rows: int) -> None:
    limits = chosen_limits(model) | {cache: rows}
    for entry in model.metadata_props:
        if entry.key == METADATA_KEY:
            entry.value = json.dumps(limits, sort_keys=True)
            return
    model.metadata_props.add(key=METADATA_KEY, value=json.dumps(limits, sort_keys=True))
