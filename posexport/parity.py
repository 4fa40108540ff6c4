"""Parity: run a built graph on runtimes and judge each output against the float64 oracle (DESIGN 4.2).

Running lives in posexport.runtimes; this module only makes inputs, compares and reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .encodings.base import Case
from .export import Artifact
from .runtimes import RUNTIMES, get_runtime


@dataclass(frozen=True)
class Comparison:
    max_abs: float
    # max|out − ref| / max(1, max|ref|): the error DESIGN 4.2 bounds; also the smallest passing tolerance.
    normalised: float
    p99: float
    bound: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.normalised)) and self.normalised <= self.bound


def compare(out: np.ndarray, ref: np.ndarray, bound: float) -> Comparison:
    if out.shape != ref.shape:
        return Comparison(float("inf"), float("inf"), float("inf"), bound)
    diff = np.abs(out.astype(np.float64) - ref)
    # Infinite references (an ALiBi mask) must be matched exactly; they do not scale the error.
    finite = np.isfinite(ref)
    diff = np.where(finite, diff, np.where(out.astype(np.float64) == ref, 0.0, np.inf))
    scale = max(1.0, float(np.max(np.abs(ref[finite]), initial=0.0)))
    return Comparison(float(diff.max(initial=0.0)), float(diff.max(initial=0.0)) / scale, float(np.percentile(diff, 99)) / scale if diff.size else 0.0, bound)


@dataclass
class CaseResult:
    case: str
    runtime: str
    status: str  # pass | fail | error
    comparison: Comparison | None = None
    message: str = ""


@dataclass
class Report:
    manifest: dict[str, Any]
    results: list[CaseResult] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.status == "pass" for r in self.results)

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "error": 0}
        for r in self.results:
            out[r.status] += 1
        return out


def bound_for(artifact: Artifact, feeds: dict[str, np.ndarray], tolerance: float | None) -> float:
    if tolerance is not None:
        return tolerance
    enc, p = artifact.encoding, artifact.params
    largest = enc.largest_position(p, feeds) if enc.position_scaled_tolerance else None
    return artifact.options.dtype.bound(largest)


def run_parity(
    artifact: Artifact,
    runtimes: Sequence[str] | None = None,
    *,
    seqs: tuple[int, ...] | None = None,
    batches: tuple[int, ...] | None = None,
    seed: int = 0,
    tolerance: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Every case of the encoding's sweep on every requested runtime, each against the float64 oracle.
    Every runtime sees byte-identical inputs (one seeded generator per case)."""
    report = Report(artifact.manifest)
    sessions = {}
    for name in runtimes or list(RUNTIMES):
        rt = get_runtime(name)
        ok, why = rt.available()
        if ok:
            ok, why = rt.supports(artifact)
        if not ok:
            report.unavailable[name] = why
            continue
        try:
            sessions[name] = rt.load(artifact)
        except Exception as e:  # a runtime that cannot load the graph says so; the run goes on
            report.unavailable[name] = f"failed to load the graph: {one_line(e)}"
    enc, p = artifact.encoding, artifact.params
    for index, case in enumerate(enc.cases(p, seqs, batches)):
        rng = np.random.default_rng([seed, index])
        feeds = enc.feeds(p, case, artifact.options.dtype, rng)
        ref = enc.reference(p, feeds)
        bound = bound_for(artifact, feeds, tolerance)
        for name, session in sessions.items():
            if progress:
                progress(f"{case.label} on {name}")
            report.results.append(judge(session, feeds, ref, bound, case, name))
    return report


def judge(session: Any, feeds: dict[str, np.ndarray], ref: np.ndarray, bound: float, case: Case, runtime: str) -> CaseResult:
    try:
        out = session.run(feeds)
    except Exception as e:
        return CaseResult(case.label, runtime, "error", message=one_line(e))
    cmp = compare(np.asarray(out), ref, bound)
    return CaseResult(case.label, runtime, "pass" if cmp.passed else "fail", cmp)


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


def parse_ints(text: str | None, option: str) -> tuple[int, ...] | None:
    from .errors import PosexportError

    if not text:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise PosexportError(f"{option} {text!r}: expected comma-separated positive integers, e.g. 1,17,512") from None
    if any(v < 1 for v in values):
        raise PosexportError(f"{option} {text!r}: every value must be ≥ 1")
    return values
