"""``posexport doctor``: the exporter that wrote a model, every positional-encoding site, what was
recovered from it, and its faults with numbers; with the model folder, the exporter's known faults. The
report is a dict (JSON-able, schema in docs/surgery.md, ``schema_version`` below) that the CLI renders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx

from ..onnxgraph.genai import context_length
from ..onnxgraph.graph import Graph, load
from .. import guarded
from .export_metadata import check_export_metadata
from .exporter_faults import check_known_faults
from .exporters import identify
from .find import KINDS, find_in
from .recorded import chosen_limits
from .sites import Site
from .source import Candidates, candidates, default_source, what_to_pass

# Bumped whenever a key of the report is renamed, removed or changes meaning (adding keys does not).
SCHEMA_VERSION = 1


def genai_context(model_path: Path | None) -> int | None:
    """context_length of an onnxruntime-genai folder's genai_config.json, if the model sits in one."""
    return None if model_path is None else context_length(model_path.parent)


def params_or_fault(site: Site, values: Candidates | None, graph: Graph) -> Any:
    """The parameters the site's faults are measured against, as its kind's rebuild gives them (a rope's when known
    and consistent with the graph; a mismatch becomes a fault)."""
    kind = KINDS.get(site.kind)
    return None if kind is None else kind.rebuilds.for_doctor(kind, graph, site, values)


def model_config(folder: Path | None) -> dict[str, Any]:
    """The model folder's config.json as saved ({} without a folder)."""
    if folder is None or not (folder / "config.json").is_file():
        return {}
    config = guarded.read_json("config.json", root=folder)
    return config if isinstance(config, dict) else {}


def unrecognised(sites: list[Site], model_path: Path | None) -> list[dict[str, Any]]:
    """Rope sites whose frequencies no plain or linear rope gives: each with what to pass to measure and patch it."""
    return [{"site": number, "node": site.anchor, "what_to_pass": what_to_pass(site, model_path)}
            for number, site in enumerate(sites, 1)
            if "rotary_dim" in site.recovered and "recognised" in site.recovered and site.recovered["recognised"] is None]


def reaching(graph: Graph, output: str) -> set[str]:
    """Names of the nodes ``output`` is computed from."""
    names, todo = set(), [output]
    while todo:
        node = graph.producer.get(todo.pop())
        if node is not None and node.name not in names:
            names.add(node.name)
            todo += [i for i in node.input if i]
    return names


def disconnected(graph: Graph, sites: list[Site]) -> str | None:
    """A line naming the attention nodes fed by a site that the first output (the logits) ignores."""
    outputs = [o.name for o in graph.model.graph.output]
    if not outputs:
        return None
    first = "logits" if "logits" in outputs else outputs[0]
    used = reaching(graph, first)
    ignored = [f for s in sites for f in s.feeds if f and f not in used]
    if not ignored:
        return None
    return (f"{first!r} does not depend on {', '.join(ignored[:4])}{' …' if len(ignored) > 4 else ''}: the exporter wired the output "
            "past those layers (seen with onnxruntime-genai 0.18 and transformers 5.x in tiny models), so no parity of "
            f"{first!r} can check them")


def diagnose(model: onnx.ModelProto, values: dict[str, Any] | Candidates | None = None, position_limit: int | None = None,
             model_path: Path | None = None, from_model: Path | None = None) -> dict[str, Any]:
    """The doctor's report for a loaded model; ``values`` are the rope options (one or several candidates)
    the model should compute, e.g. from its folder ``from_model``, whose config is then checked against
    the exporter's known faults. External data not loaded is read from beside ``model_path``, only for
    the tensors a site needs."""
    graph = Graph(model, model_path)
    sites = find_in(graph)
    values = candidates(values)
    context = {"scalings": {v.get("scaling", "default") for v in values or []}, "position_limit": position_limit,
               "ropes": list(values or [])}
    for site in sites:
        p = params_or_fault(site, values, graph)
        KINDS[site.kind].diagnose(graph, site, p, context)
    exporter = identify(model, model_path)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model": str(model_path) if model_path else None,
        "exporter": exporter.as_dict(),
        "sites": [s.as_dict() for s in sites],
        "exporter_faults": check_known_faults(sites, values or [], Path(from_model), exporter, chosen_limits(model)) if from_model else None,
    }
    metadata = check_export_metadata(model, model_path, model_config(from_model))
    if metadata is not None:
        report["export_metadata"] = metadata
    report["faults"] = sum(len(s.faults) for s in sites) + len(report["exporter_faults"] or []) + len((metadata or {}).get("faults", []))
    if values is None:  # what to pass for each rope the doctor could not name (summed up on the verdict line)
        report["unrecognised"] = unrecognised(sites, model_path)
    context_length = genai_context(model_path)
    if context_length is not None:
        report["genai_context_length"] = context_length
    if not sites:
        report["notes"] = ["no positional-encoding site found (kinds looked for: " + ", ".join(KINDS) + ")"]
    wiring = disconnected(graph, sites)
    if wiring:
        report["notes"] = report.get("notes", []) + [wiring]
    return report


def doctor(path: str | Path, values: dict[str, Any] | Candidates | None = None, position_limit: int | None = None,
           from_model: str | Path | None = None, beside: bool = True) -> dict[str, Any]:
    """The doctor's report for the model file at ``path``: its graph, and from the external data beside
    it only the tensors a site reads (frequencies, caches, slopes), each by offset and length; with
    ``from_model`` (the folder ``values`` were read from) also the exporter's known faults. Without either (and
    with ``beside``), a config.json beside the model is the source, and a note says so."""
    path = Path(path)
    notes: list[str] = []
    if values is None and from_model is None and beside:
        values, notes = default_source(path)
        from_model = path.parent if values is not None else None
    report = diagnose(load(path), values, position_limit, path, Path(from_model) if from_model else None)
    if notes:
        report["notes"] = notes + report.get("notes", [])
    return report
