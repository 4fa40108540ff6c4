"""The public API, one call per thing the command line does (`import posexport` exposes these lazily). Each
returns, as data, what its command prints or writes with `--json` (docs/api.md, docs/schemas/).

    import posexport
    art = posexport.build("rope", {"head_dim": 64, "heads": 8, "base": 500000.0})
    report = posexport.parity(art, ["ort-cpu", "openvino"])          # graph parity: a Report
    found = posexport.doctor("model.onnx", from_model="Llama-3.1-8B/")  # the doctor's report (a dict)
    posexport.patch("model.onnx", "fixed/model.onnx", from_model="Llama-3.1-8B/")
    verdict = posexport.model_parity("fixed/model.onnx", against_hf="Llama-3.1-8B/", text="LICENSE", generate=64)

`bench` and `extend` are the names of posexport's own modules, so their calls are ``benchmark``,
``benchmark_models`` and ``extend_learned``. Each call imports what it needs when it runs, so that `posexport.listing()` and `posexport.env()` stay as light as
`posexport list`, and a command's `--help` never loads torch.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .contract import SCHEMA_VERSION, Artifact

if TYPE_CHECKING:
    import onnx

    from .bench.models import ModelBench
    from .bench.timing import BenchResult
    from .surgery import Patched
    from .verdicts import Report


def build(encoding: str = "rope", params: Mapping[str, Any] | None = None, *, preset: str | None = None,
          from_config: str | Path | None = None, **options: Any) -> Artifact:
    """Build an encoding's graph in memory (``options``: dtype, opset, source, backend, target, ...); a rope
    ``preset`` or a model's ``from_config`` gives the parameters that ``params`` override.
    ``posexport.save(artifact, folder)`` writes NAME.onnx and its manifest."""
    from . import export
    from .options import encoding_values

    encoding, values = encoding_values(encoding, params or {}, preset, from_config)
    return export.build(encoding, values, **options)


def build_model(folder: str | Path, out: str | Path, *, encoding: str | None = None, name: str | None = None,
                dtype: str = "float32", **overrides: Any) -> dict[str, Any]:
    """`posexport build --from-model`: every encoding of a transformers model folder, built and saved into ``out``
    (``overrides``: parameters replacing the model's, and build options: opset, source, backend, target); returns
    what `--json` writes: each graph's files, role and notes, and the layer plan."""
    from .models.cli import build as build_from_model

    options = {k: overrides.pop(k) for k in ("opset", "source", "backend", "target") if k in overrides}
    return build_from_model(Path(folder), encoding, overrides, Path(out), name, dtype=dtype, **options)


def listing(models: bool = False) -> dict[str, Any]:
    """`posexport list`: every encoding and preset, or (``models``) every model type --from-model reads with its
    encodings, the transformers versions and the installed model types the catalogue does not know."""
    if models:
        from .models.catalogue import catalogue, unknown_types
        from .upstream import versions_note

        return {"schema_version": SCHEMA_VERSION, "versions": versions_note(), "unknown_types": unknown_types(),
                "models": [{"model_type": e.model_type, "encodings": e.text} for e in catalogue()]}
    from .registry import ENCODINGS
    from .rope.config import describe_presets

    return {"schema_version": SCHEMA_VERSION,
            "encodings": [{"name": e.name, "summary": e.summary} for e in ENCODINGS.values()],
            "presets": [{"name": n, "scaling": s, "follows": f} for n, s, f in describe_presets()]}


def save(artifact: Artifact, out_dir: str | Path, name: str | None = None) -> tuple[Path, Path]:
    """Write NAME.onnx and NAME.json into ``out_dir`` (NAME: the artifact's default unless given)."""
    from . import export

    return export.save(artifact, out_dir, name)


def load(path: str | Path) -> Artifact:
    """A built graph and its manifest, checked against each other (docs/trust.md)."""
    from . import export

    return export.load(path)


def parity(graphs: Artifact | str | Path | Sequence[Artifact | str | Path], runtimes: Sequence[str] | None = None,
           **options: Any) -> Report:
    """Graph parity: built graphs (artifacts, or paths of built .onnx files with their manifests) on each
    runtime against the float64 oracle, then their properties (``options``: seqs, batches, seed,
    tolerance, pairwise, properties, keep_outputs, saved, progress)."""
    from . import export, verdicts

    items = [graphs] if isinstance(graphs, (Artifact, str, Path)) else list(graphs)
    artifacts = [g if isinstance(g, Artifact) else export.load(g) for g in items]
    return verdicts.run_parity(artifacts, runtimes, **options)


def model_parity(model: str | Path, against: str | Path | None = None, **options: Any) -> Report:
    """Whole-model parity (`posexport model-parity`): ``model`` against ``against`` or ``against_hf=DIR``
    (``options``: those of posexport.verdicts.model_parity, docs/api.md)."""
    from . import verdicts

    return verdicts.model_parity(model, against, **options)


def rope_values(from_model: str | Path | None, from_config: str | Path | None, preset: str | None,
                options: Mapping[str, Any] | None) -> Any:
    from . import surgery

    return surgery.requested_values(from_model, from_config, preset, dict(options or {}))


def doctor(model: str | Path, *, from_model: str | Path | None = None, from_config: str | Path | None = None,
           preset: str | None = None, position_limit: int | None = None, **rope: Any) -> dict[str, Any]:
    """Every positional-encoding site of an exported model and its faults, with numbers (the report
    `posexport doctor --json` writes); with ``from_model`` also the exporter's known faults. ``rope`` options
    (base=..., scaling=...) may stand for a source."""
    from . import surgery

    return surgery.doctor(model, rope_values(from_model, from_config, preset, rope), position_limit, from_model)


def patch(model: str | Path, out: str | Path, *, from_model: str | Path | None = None, from_config: str | Path | None = None,
          preset: str | None = None, position_limit: int | None = None, extend_learned: int | None = None,
          strategy: str = "mean", replace_mismatched: bool = False, **rope: Any) -> Patched:
    """Write ``model`` with every site replaced by posexport's exact maths to ``out`` (the source is never
    modified); returns what was patched and the files written (``.report()``: what `--json` writes).
    ``extend_learned`` grows every learned position table to that many positions by ``strategy`` (mean or
    interpolate), as `--extend-learned`; ``replace_mismatched`` rebuilds a site whose parameters disagree with
    the source's, as `--replace-mismatched`."""
    from . import surgery

    extension = surgery.Extension(extend_learned, strategy) if extend_learned is not None else None
    return surgery.patch_file(model, out, rope_values(from_model, from_config, preset, rope), position_limit, extension,
                              replace_mismatched)


def splice(model: onnx.ModelProto, at: Mapping[str, str], position_ids: str | None = None, encoding: str = "rope",
           **params: Any) -> onnx.ModelProto:
    """A copy of ``model`` with ``encoding`` applied to each tensor named in ``at`` (docs/api.md, Embed)."""
    from . import surgery

    return surgery.splice(model, at, position_ids, encoding, **params)


def benchmark(encodings: str | Sequence[str] = "rope", params: Mapping[str, Any] | None = None, **options: Any) -> BenchResult:
    """`posexport bench`: every backend of ``encodings`` (with ``params``, e.g. heads=32, head_dim=128) timed
    against a plain copy, the naive export and PyTorch eager; ``options`` are the command's (seqs, layouts,
    decode_positions, runtimes, backends, dtypes, threads, warmup, repeats, ...). ``.to_json()`` is `--json`."""
    from .bench.engine import config_from_options, run_bench

    names = encodings if isinstance(encodings, str) else ",".join(encodings)
    return run_bench(config_from_options(params=params, encodings=names, **options))


def benchmark_models(model: str | Path, against: str | Path, prompts: Sequence[int] = (512, 2048),
                 decode: Sequence[int] = (2048,), threads: int = 1, warmup: int = 5, repeats: int = 30) -> ModelBench:
    """`posexport bench --model FIXED --against ORIGINAL`: both whole models' prompts and decode steps, interleaved
    (``.as_dict()`` is `--json`)."""
    from .bench.models import bench_models as timed

    return timed(model, against, prompts, decode, threads, warmup, repeats)


def extend_learned(source: str | Path, to: int, strategy: str = "mean", *, key: str | None = None, out: str | Path | None = None,
           name: str | None = None) -> list[Path]:
    """`posexport extend`: a learned graph or weights file grown to ``to`` rows, written as new files (the source is
    never modified); returns the paths written."""
    from .extend import extend_file

    return extend_file(source, to, strategy, key=key, out=out, name=name)


# Distributions a bug report names, beside Python and the platform.
ENV_PACKAGES = ("posexport", "numpy", "torch", "onnx", "onnxruntime", "onnxruntime-gpu", "onnxscript", "openvino",
                "transformers", "tokenizers", "onnxruntime-genai", "ml_dtypes", "protobuf", "typer", "rich")


def env() -> dict[str, Any]:
    """`posexport env`, for bug reports: Python, the platform, the versions of the packages posexport runs with, and
    every runtime, available or not and why (the browser ones start a headless Chromium to say: a second or two)."""
    from .runtimes import RUNTIMES
    from .verdicts.runners import MODEL_RUNTIMES

    versions = {}
    for name in ENV_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    runtimes = []
    for name, runtime in {**RUNTIMES, **MODEL_RUNTIMES}.items():
        ok, why = runtime.available()
        runtimes.append({"name": name, "available": ok, "why_not": why or None})
    return {"schema_version": SCHEMA_VERSION, "python": sys.version.split()[0], "platform": platform.platform(),
            "machine": platform.machine(), "versions": versions, "runtimes": runtimes}
