"""What `posexport build --from-model` and `posexport parity --from-model` do beyond parsing options, kept
here so that the CLI stays a thin layer and Python users can call the same functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..dtypes import dtypes_of
from ..errors import PosexportError
from . import read_model
from .build import build_model, compress, describe, save_model
from .plan import ModelPlan


def build(folder: Path, encoding: str | None, overrides: dict[str, Any], out: Path, name: str | None,
          conflicts: dict[str, Any] | None = None, dtype: str = "float32", **options: Any) -> list[str]:
    """Build and save every role of the model; returns the lines to print (files written, layers used)."""
    for option, value in (conflicts or {}).items():
        if value:
            raise PosexportError(f"{option}: --from-model reads the model's own encoding; drop {option}")
    plan, dtypes = read_model(folder), dtypes_of(dtype)
    built = [b for d in dtypes for b in build_model(plan, encoding, overrides, name=name, dtype=d, **options)]
    for b in built if len(dtypes) > 1 else ():  # one graph per dtype: NAME-DTYPE, as `posexport build` names them
        b.name = f"{b.name}-{b.artifact.options.dtype.name}"
    lines = []
    for b, (onnx_path, json_path) in zip(built, save_model(built, out)):
        m = b.artifact.manifest
        lines.append(f"wrote {onnx_path} ({m['bytes']:,} bytes, sha256 {m['sha256'][:12]}) and {json_path}")
        lines.append(f"  {describe(b)}")
        lines += [f"  note: {n}" for n in b.role.notes]
    summary = plan_summary(plan)
    return lines + ([f"plan: {summary}"] if summary else [])


def plan_summary(plan: ModelPlan) -> str:
    """The layer plan in runs: 'layers 0-2: rope; 3: NoPE + query-scale'."""
    runs: list[tuple[str, list[int]]] = []
    for lp in plan.layer_plan():
        if runs and runs[-1][0] == lp.describe():
            runs[-1][1].append(lp.layer)
        else:
            runs.append((lp.describe(), [lp.layer]))
    return "; ".join(f"layers {compress(tuple(ids))}: {what}" if len(ids) > 1 else f"layer {ids[0]}: {what}"
                     for what, ids in runs)
