"""One cell of the matrix: an architecture's tiny model exported by one exporter (in a subprocess of the
exporter's venv), then doctor, patch and model-parity against float64 transformers with the original
beside it, and the patched model's run time over the original's. A cell is FIXED when the patched model
is within tolerance of transformers at every prompt; otherwise its verdict says why, in one line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from posexport.bench.models import bench_models
from posexport.errors import PosexportError, one_line
from posexport.surgery import doctor, patch_file, requested_values
from posexport.verdicts import FeedCase, HfOracle, Report, model_parity

from .exporters import EXPORTERS
from .models import Architecture

ROOT = Path(__file__).resolve().parents[1]
POSITION_LIMIT = 4096  # what every patched model covers: past every prompt of the matrix
EXPORT_TIMEOUT = 900


def python_of(venv: str | None) -> str:
    if venv is None:
        return sys.executable
    python = ROOT / ".venvs" / venv / "bin" / "python"
    if not python.is_file():
        raise PosexportError(f".venvs/{venv} is missing: make it with `sh scripts/exporter-venv.sh {venv}`")
    return str(python)


def export(exporter: str, model: Path, out: Path) -> dict[str, str]:
    """{"onnx": path} or {"failed": the exporter's own error}."""
    command = [python_of(EXPORTERS[exporter].venv), "-m", "matrix.exporters.run", exporter, str(model), str(out)]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"failed": f"no export after {EXPORT_TIMEOUT} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = [line for line in proc.stderr.splitlines() if line.strip()]
        return {"failed": (tail[-1].strip() if tail else f"exit status {proc.returncode}")[:300]}
    return json.loads(lines[-1])


# Sites whose values are trained: exact within their rows, with nothing past them to be exact to.
TRAINED_TABLES = {"learned-table"}
GREEDY_STEPS = 16


def trained_tables(arch: Architecture, model: Path, original: Path, limit: int | None) -> dict[str, Any]:
    """A model whose only positional sites are trained tables: nothing to patch (``patch --extend-learned N`` grows them on
    request, with values no training gave); the original is held against float64 transformers inside its limit."""
    found = {"verdict": "NOTHING TO PATCH", "unpatched": f"raises at position {limit}" if limit is not None else "—"}
    why = "the sites are trained tables, exact within their rows (`posexport patch --extend-learned N` grows them on request)"
    try:
        report = parity(original, HfOracle(model), arch.prompts[:1])
    except PosexportError as e:
        return found | {"reason": f"{why}; the original is not compared: {one_line(e, 200).split(': ', 1)[-1]}"}
    row = report.results[0] if report.results else None
    if row is None:
        return found | {"reason": f"{why}; the original is not compared: " + "; ".join(n.reason for n in report.not_compared[:1])}
    found["errors"] = {str(arch.prompts[0]): {"before": row.comparison.normalised if row.comparison else "fails: " + row.message,
                                             "after": None, "ok": row.status == "pass"}}
    if row.status != "pass":
        return found | {"verdict": "EXPORT WRONG", "reason": f"exporter wrong upstream: the original at {row.case}: {row.message}"}
    return found | {"reason": why}


def doctor_summary(onnx_path: Path, values: Any) -> dict[str, Any]:
    """The sites (kinds), their faults (names) and the least position limit the doctor found (None: none)."""
    report = doctor(onnx_path, values)
    limits = [f["value"] for s in report["sites"] for f in s["faults"] if f["fault"] == "position-limit" and f["value"]]
    return {"sites": [s["kind"] for s in report["sites"]],
            "faults": sorted({f["fault"] for s in report["sites"] for f in s["faults"]}),
            "limit": min(limits) if limits else None}


def before(original: str) -> Any:
    """The original's outcome as the verdict layer states it: its error, or how it failed."""
    try:
        return float(original)
    except ValueError:
        return original


def parity_errors(report: Report, arch: Architecture) -> dict[str, Any]:
    """Per prompt: the original's error (or its failure) and the patched model's."""
    out = {}
    for row, prompt in zip(report.results, arch.prompts):
        out[str(prompt)] = {"before": before(row.original),
                            "after": row.comparison.normalised if row.comparison else "fails: " + row.message,
                            "ok": row.status == "pass"}
    return out


def wrong_before_positions(report: Report) -> str | None:
    """The exporter's own fault, when the original is already off float64 transformers at the first prompt
    (inside the trained length) and the patched model as much (within 10%): not in what the patch replaced."""
    first = report.results[0] if report.results else None
    original = before(first.original) if first is not None and first.comparison is not None else None
    if not isinstance(original, float) or original <= first.comparison.bound or first.comparison.passed:
        return None
    after = first.comparison.normalised
    if abs(after - original) > 0.1 * original:
        return None
    return (f"exporter wrong upstream: its {first.output or 'output'} are {original:.1e} off float64 transformers at {first.case}, inside "
            f"the trained length, before the patch ({after:.1e} after): the fault is not in the positional sites posexport replaced")


def verdict(cell: dict[str, Any], report: Report) -> None:
    if report.passed:
        cell["verdict"], cell["reason"] = "FIXED", ""
        return
    wrong = wrong_before_positions(report)
    if wrong is not None:
        cell["verdict"], cell["reason"] = "EXPORT WRONG", wrong
        return
    bad = next((r for r in report.results if r.status != "pass"), None)
    what = (bad.message if bad else "nothing compared: " + "; ".join(n.reason for n in report.not_compared[:1]))
    cell["verdict"], cell["reason"] = "NOT FIXED", f"not yet: patched model at {bad.case if bad else 'every case'}: {what}"


def parity(model: Path, oracle: HfOracle, prompts: tuple[int, ...], original: Path | None = None, generate: int = 0) -> Report:
    return model_parity(model, oracle=oracle, cases=[FeedCase(n) for n in prompts], runtimes=["ort-cpu"], outputs=["logits"],
                        original=original, generate=generate)


def over_bound(row: Any) -> bool:
    """The original's logits were off transformers by more than the case's bound (a float error, not a failure)."""
    error = before(row.original)
    return isinstance(error, float) and row.comparison is not None and error > row.comparison.bound


def first_over(original: Path, oracle: HfOracle, good: int, bad: int) -> int:
    """The shortest prompt, between one within the bound (``good`` tokens) and one over it (``bad``), whose logits are
    over the bound: bisected on the prompt's length (a call's error only grows with its length in these models)."""
    while bad - good > 1:
        middle = (good + bad) // 2
        row = parity(original, oracle, (middle,)).results[0]
        good, bad = (middle, bad) if row.status == "pass" else (good, middle)
    return bad


def diverged(original: Path, oracle: HfOracle, prompt: int) -> str:
    """Greedy decoding of 16 tokens after ``prompt`` seeded random ids (the tiny word-level tokenizer has no real
    text), the original against float64 transformers: the first step whose token differs."""
    report = parity(original, oracle, (prompt,), generate=GREEDY_STEPS)
    run = report.generations[0] if report.generations else None
    if run is None or run.message:
        return f"; greedy decoding not compared ({run.message if run else 'no generation'})"
    if run.first_divergence is None:
        return f"; greedy tokens agree for {run.steps} steps after it"
    return f"; greedy tokens diverge at step {run.first_divergence} after it"


def unpatched(cell: dict[str, Any], report: Report, arch: Architecture, original: Path, oracle: HfOracle | None) -> str:
    """What goes wrong without the patch, from the original's results on the cell's prompts: it raises (at the
    doctor's position limit), its logits go over the bound (from the shortest prompt that does, with where greedy
    tokens part), or nothing up to the longest prompt."""
    rows = list(zip(arch.prompts, report.results))
    if any(str(row.original).startswith("fails") for _, row in rows):
        limit = cell.get("limit")
        failed = next(n for n, row in rows if str(row.original).startswith("fails"))
        return f"raises at position {limit}" if limit is not None else f"raises at a {failed}-token prompt"
    unknown = [n for n, row in rows if not isinstance(before(row.original), float)]
    if unknown:  # the verdict layer runs the original only beside a patched model that ran
        return f"not measured: the original was not run at the {unknown[0]}-token prompt (the patched model failed there)"
    over = [n for n, row in rows if over_bound(row)]
    if oracle is None or not over:
        return f"nothing within max positions ({arch.positions}; within the bound up to {arch.prompts[-1]} tokens)"
    good = max([0] + [n for n, row in rows if not over_bound(row) and n < over[0]])
    first = first_over(original, oracle, good, over[0])
    return f"error over the bound from a {first}-token prompt" + diverged(original, oracle, first)


def run_cell(arch: Architecture, exporter: str, model: Path, work: Path) -> dict[str, Any]:
    """The cell's record (JSON-able): exported?, sites, faults, verdict and reason, errors, run-time ratio, and what
    goes wrong without the patch."""
    start = time.monotonic()
    cell: dict[str, Any] = {"architecture": arch.name, "model_type": arch.config["model_type"], "exporter": exporter,
                            "exported": False}
    if not arch.judged_by(exporter):
        return cell | {"verdict": "NOT JUDGED", "reason": f"not judged: {arch.not_judged}", "seconds": 0.0}
    try:
        cell |= checked(arch, exporter, model, work / f"{arch.name}--{exporter}")
    except Exception as e:  # a crash in posexport or a runtime is this cell's result, not the end of the run
        cell |= {"verdict": "NOT FIXED", "reason": f"not yet: {one_line(e, 240)}"}
    finally:
        cell["seconds"] = round(time.monotonic() - start, 1)
    # Reasons name files relative to the scratch folder, so that pages of two runs compare.
    cell["reason"] = cell.get("reason", "").replace(f"{work}/", "")
    return cell


def checked(arch: Architecture, exporter: str, model: Path, out: Path) -> dict[str, Any]:
    done = export(exporter, model, out)
    if "failed" in done:
        return {"verdict": "EXPORT FAILED", "reason": f"exporter failed upstream: {done['failed']}"}
    original = Path(done["onnx"])
    cell: dict[str, Any] = {"exported": True}
    try:
        values = requested_values(from_model=model)
        cell |= doctor_summary(original, values)
        if cell["sites"] and set(cell["sites"]) <= TRAINED_TABLES:
            return cell | trained_tables(arch, model, original, cell["limit"])
        fixed = out.with_name(out.name + "-fixed") / "model.onnx"
        fixed.parent.mkdir(parents=True, exist_ok=True)
        patch_file(original, fixed, values, POSITION_LIMIT)
    except PosexportError as e:
        return cell | {"verdict": "REFUSED", "reason": f"not yet: posexport refuses: {one_line(e, 240)}"}
    try:
        oracle = HfOracle(model)
    except PosexportError as e:
        return cell | {"verdict": "UNVERIFIED", "reason": f"not yet: patched, but no float64 oracle: {one_line(e, 200)}"}
    report = parity(fixed, oracle, arch.prompts, original)
    cell["errors"] = parity_errors(report, arch)
    unjudged = EXPORTERS[exporter].unjudged
    cell["unpatched"] = unpatched(cell, report, arch, original, None if unjudged else oracle)
    verdict(cell, report)
    if unjudged and all(r.comparison for r in report.results):  # it ran: its errors are the quantisation's
        cell["verdict"], cell["reason"] = "UNVERIFIED", f"not yet: patched, but {unjudged}"
        if cell["unpatched"].startswith("nothing"):
            cell["unpatched"] = "not judged (see the reason)"
    cost = bench_models(fixed, original, prompts=(arch.prompts[0],), decode=(), warmup=3, repeats=15)
    ratio = cost.rows[0].ratio
    cell["time_ratio"] = None if math.isnan(ratio) else round(ratio, 3)
    cell["paths"] = {"original": str(original), "fixed": str(fixed)}
    return cell
