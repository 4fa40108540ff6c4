"""The public API, one call per thing the command line does (`import posexport` exposes these lazily).

    import posexport
    art = posexport.build("rope", {"head_dim": 64, "heads": 8, "base": 500000.0})
    report = posexport.parity(art, ["ort-cpu", "openvino"])          # graph parity: a Report
    found = posexport.doctor("model.onnx", from_model="Llama-3.1-8B/")  # the doctor's report (a dict)
    posexport.patch("model.onnx", "fixed/model.onnx", from_model="Llama-3.1-8B/")
    verdict = posexport.model_parity("fixed/model.onnx", against_hf="Llama-3.1-8B/", text="LICENSE", generate=64)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import export, surgery, verdicts
from .contract import Artifact


def build(encoding: str, params: Mapping[str, Any] | None = None, **options: Any) -> Artifact:
    """Build an encoding's graph in memory (``options``: dtype, opset, source, backend, target, ...);
    ``posexport.save(artifact, folder)`` writes NAME.onnx and its manifest."""
    return export.build(encoding, dict(params or {}), **options)


def parity(graphs: Artifact | str | Path | Sequence[Artifact | str | Path], runtimes: Sequence[str] | None = None,
           **options: Any) -> verdicts.Report:
    """Graph parity: built graphs (artifacts, or paths of built .onnx files with their manifests) on each
    runtime against the float64 oracle, then their properties (``options``: seqs, batches, seed,
    tolerance, pairwise, properties, keep_outputs, saved, progress)."""
    items = [graphs] if isinstance(graphs, (Artifact, str, Path)) else list(graphs)
    artifacts = [g if isinstance(g, Artifact) else export.load(g) for g in items]
    return verdicts.run_parity(artifacts, runtimes, **options)


def rope_values(from_model: str | Path | None, from_config: str | Path | None, preset: str | None,
                options: Mapping[str, Any] | None) -> Any:
    return surgery.requested_values(from_model, from_config, preset, dict(options or {}))


def doctor(model: str | Path, *, from_model: str | Path | None = None, from_config: str | Path | None = None,
           preset: str | None = None, position_limit: int | None = None, **rope: Any) -> dict[str, Any]:
    """Every positional-encoding site of an exported model and its faults, with numbers (the report
    `posexport doctor --json` writes). ``rope`` options (base=..., scaling=...) may stand for a source."""
    return surgery.doctor(model, rope_values(from_model, from_config, preset, rope), position_limit, from_model)


def patch(model: str | Path, out: str | Path, *, from_model: str | Path | None = None, from_config: str | Path | None = None,
          preset: str | None = None, position_limit: int | None = None, extend_learned: int | None = None,
          strategy: str = "mean", replace_mismatched: bool = False, **rope: Any) -> surgery.Patched:
    """Write ``model`` with every site replaced by posexport's exact maths to ``out`` (the source is never
    modified); returns what was patched and the files written. ``extend_learned`` grows every learned
    position table to that many positions by ``strategy`` (mean or interpolate), as `--extend-learned`;
    ``replace_mismatched`` rebuilds a site whose parameters disagree with the source's, as `--replace-mismatched`."""
    extension = surgery.Extension(extend_learned, strategy) if extend_learned is not None else None
    return surgery.patch_file(model, out, rope_values(from_model, from_config, preset, rope), position_limit, extension,
                              replace_mismatched)


splice = surgery.splice
model_parity = verdicts.model_parity
save = export.save
load = export.load
