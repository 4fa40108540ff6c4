"""`posexport parity --from-model DIR [GRAPH.onnx]`: every runtime against the float64 oracle as usual,
and the graph against the model's own code (the `hf` runtime), with the model-agreement bound of
posexport.models.oracle. Both numbers are in the report: `hf` (the model's code against the oracle of the
graph's parameters, within the model-agreement bound) and `hf vs <runtime>` (the graph, as each runtime
ran it, against the model's code, within twice that bound: each side is within it of the oracle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import export
from ..contract import Artifact
from ..dtypes import dtypes_of
from ..errors import PosexportError
from ..models import read_model
from ..models.build import build_model
from ..models.oracle import Hf
from ..models.plan import ModelPlan, Role
from .graphs import resolve_runtimes, run_parity
from .report import Report


def matching_role(plan: ModelPlan, artifact: Artifact) -> Role:
    """The model's role a built graph claims to be: its manifest's role, else the only role of its encoding."""
    recorded = (artifact.manifest.get("model") or {}).get("role")
    same = [r for r in plan.roles if r.encoding == artifact.encoding.name]
    if recorded in {r.role for r in same}:
        return plan.role(recorded)
    if len(same) == 1:
        return same[0]
    uses = ", ".join(f"{r.role} ({r.encoding})" for r in plan.roles)
    if not same:
        raise PosexportError(f"--from-model {plan.folder}: the graph is {artifact.encoding.name}, the "
                             f"{plan.architecture} model uses {uses}")
    raise PosexportError(f"--from-model {plan.folder}: the graph's manifest names no role and the model has "
                         f"several {artifact.encoding.name} roles ({uses}); rebuild it with --from-model")


def model_artifacts(folder: str | Path, graph: str | Path | None, dtypes: list[str], **build: Any) -> list[tuple[Artifact, Hf]]:
    """(graph, the hf runtime for it): the given graph judged against the model, or every role built."""
    plan = read_model(folder)
    if graph is not None:
        art = export.load(graph)
        return [(art, Hf(plan.manifest_entry(matching_role(plan, art))))]
    return [(b.artifact, Hf(b.artifact.manifest["model"])) for d in dtypes for b in build_model(plan, dtype=d, **build)]


def run_model_parity(folder: str | Path, graph: str | Path | None = None, runtimes: list[str] | None = None,
                     dtypes: tuple[str, ...] = ("float32",), build: dict[str, Any] | None = None,
                     **options: Any) -> Report:
    """run_parity on the model's graphs (or GRAPH) with `hf` added and `hf vs <runtime>` pairs."""
    ok, why = Hf().available()
    if not ok:
        raise PosexportError(f"--from-model: judging a graph against the model's own code needs the hf runtime: {why}")
    pairs = model_artifacts(folder, graph, list(dtypes), **(build or {}))
    chosen = resolve_runtimes([n for n in (runtimes or []) if n != "hf"] or None)
    asked = options.pop("pairwise", False)
    report = Report()
    for art, hf in pairs:  # one run per graph: each has its own hf session
        # Pairs are compared case by case as the sweep goes (no outputs kept); without --pairwise only the
        # graph-vs-model pairs are reported.
        part = run_parity(art, [*chosen, hf], pairwise=True, **options)
        if not asked:
            part.pairwise = [r for r in part.pairwise if "hf" in r.runtime.split(" vs ")]
        merge(report, part)
    return report


def parity_from_model(folder: str | Path, graph: str | Path | None, conflicts: dict[str, Any] | None = None, *,
                      dtype: str = "float32", runtimes: list[str] | None = None, **options: Any) -> Report:
    """`posexport parity --from-model DIR [GRAPH]`: ``conflicts`` are options that make no sense with a model
    (a preset, encoding options, saved outputs); ``options`` are build options (opset, source, backend,
    target) and run_parity's (seqs, batches, seed, tolerance, pairwise, properties, progress)."""
    for option, value in (conflicts or {}).items():
        if value:
            raise PosexportError(f"{option}: --from-model gives the graphs and their parameters; drop {option}")
    if graph is not None and dtype != "float32":
        raise PosexportError(f"--dtype {dtype}: a built GRAPH has its own dtype")
    build = {k: options.pop(k) for k in ("opset", "source", "backend", "target") if k in options}
    return run_model_parity(folder, graph, runtimes, tuple(dtypes_of(dtype)), build, **options)


def merge(into: Report, part: Report) -> None:
    into.graphs.update(part.graphs)
    into.runtimes.update(part.runtimes)
    into.unavailable.update(part.unavailable)
    into.notes.update(part.notes)
    into.settings.update(part.settings)
    for name in ("results", "pairwise", "properties"):
        getattr(into, name).extend(getattr(part, name))
