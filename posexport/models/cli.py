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
from ..export import build_report


def build(folder: Path, encoding: str | None, overrides: dict[str, Any], out: Path, name: str | None,
          conflicts: dict[str, Any] | None = None, dtype: str = "float32", **options: Any) -> dict[str, Any]:
    """Build and save every role of the model; returns what `build --json` writes (docs/schemas/build.json):
    each graph written with its role and notes, and the layer plan; ``lines`` renders it."""
    for option, value in (conflicts or {}).items():
        if value:
            raise PosexportError(f"{option}: --from-model reads the model's own encoding; drop {option}")
    plan, dtypes = read_model(folder), dtypes_of(dtype)
    built = [b for d in dtypes for b in build_model(plan, encoding, overrides, name=name, dtype=d, **options)]
    for b in built if len(dtypes) > 1 else ():  # one graph per dtype: NAME-DTYPE, as `posexport build` names them
        b.name = f"{b.name}-{b.artifact.options.dtype.name}"
    report = build_report(((b.artifact, paths) for b, paths in zip(built, save_model(built, out))), plan=plan_summary(plan))
    for graph, b in zip(report["graphs"], built):
        graph |= {"role": describe(b), "notes": list(b.role.notes)}
    return report


def lines(report: dict[str, Any]) -> list[str]:
    """What `posexport build --from-model` prints: the files written, each graph's role, the layer plan."""
    out = []
    for graph in report["graphs"]:
        out.append(f"wrote {graph['onnx']} ({graph['bytes']:,} bytes, sha256 {graph['sha256'][:12]}) and {graph['manifest']}")
        out.append(f"  {graph['role']}")
        out += [f"  note: {n}" for n in graph["notes"]]
    return out + ([f"plan: {report['plan']}"] if report["plan"] else [])


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
