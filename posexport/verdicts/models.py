"""Whole-model parity: a model against its oracle, on the same runners as graph parity.

The oracle is a second ONNX model run on the same runner (the original, or the model before a patch), or
the transformers model in float64 (hf_oracle). Each case's seeded feeds (model_feeds) are made once and
handed to every side; every output the oracle can produce is compared (logits, and each layer's key and
value cache, mapped by layer whatever the exporter calls them), and an output it cannot produce is
reported as not compared, with the reason, never as a pass or a failure. Sessions load from the model's
path (external data read by the runtime, never held here) and each output is judged as it comes.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..comparison import compare
from ..errors import PosexportError
from ..progress import progress
from ..runtimes import ModelSession, Runtime, get_runtime
from ..runtimes.isolated import DEFAULT_TIMEOUT, IsolatedModelSession, RuntimeCrash, check_timeout, warm
from .graphs import describe, opened, valid_bound
from .hf_oracle import HfOracle, cache_slot
from .model_feeds import FeedCase, Signature, check_cases, checked_model, make_feeds, misfit, signature
from .report import CaseResult, NotCompared, Report

DEFAULT_RUNTIMES = ("ort-cpu", "ort-cpu-noopt")
TOLERANCE = 1e-4  # the default bound of a float32 (or float64) model
# A float16 or bfloat16 model's unit roundoff u. Its weights and activations round at every step, and its
# attention sums over every cached token: the default bound is ROUNDOFF_UNITS · u · √(past + seq), the
# probabilistic bound of a length-n sum (Higham & Mary) with a margin; a wrong rope is O(1) off in the key cache.
ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
ROUNDOFF_UNITS = 4
# A run's outputs, or None and the runner's message.
Attempt = tuple["dict[str, np.ndarray] | None", str]


def attempt(run: Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]], feeds: Mapping[str, np.ndarray]) -> Attempt:
    try:
        return run(feeds), ""
    except Exception as e:  # a runtime's own error is the result we report (e.g. a cache too short)
        return None, describe(e).split("Status Message: ")[-1]


Runner = Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class Oracle:
    """What the model is judged against: a ``reference`` model, loaded on each runner; otherwise one
    runner-independent oracle (the transformers model, or a caller's float64 ``run``) whose outputs are
    named as HfOracle's ('logits', 'key.L', 'value.L') and made once per case."""

    label: str
    reference: Path | None = None
    run: Runner | None = None

    def slot(self, output: str) -> tuple[str | None, str]:
        """The oracle's name for a model output, or None and why it cannot produce it."""
        if self.run is None:
            return output, ""
        if output == "logits" or output.endswith("logits"):
            return "logits", ""
        slot = cache_slot(output)
        if slot is None:
            return None, f"{self.label} gives logits and key/value caches; {output!r} is neither"
        return slot, ""


def aligned(out: np.ndarray, ref: np.ndarray, output: str) -> tuple[np.ndarray | None, str]:
    """The model's output in the oracle's layout ([batch, heads, seq, head_dim] caches may come as
    [batch, seq, heads, head_dim]), or None and why they cannot be aligned (logits are never aligned: a
    wrong shape of logits is a failure)."""
    if out.shape == ref.shape or output.endswith("logits"):
        return out, ""
    if out.ndim == 4 and out.transpose(0, 2, 1, 3).shape == ref.shape:
        return out.transpose(0, 2, 1, 3), ""
    return None, f"shape {list(out.shape)} cannot be aligned with the oracle's {list(ref.shape)}"


@dataclass
class ModelRun:
    """One run's settings and the report it fills."""

    label: str
    oracle: Oracle
    sig: Signature
    cases: list[FeedCase]
    tolerance: float | None  # None: the model's float type's bound for each case (default_bound)
    seed: int
    outputs: list[str] | None
    report: Report
    advance: Callable[[float], None] = lambda n: None

    def bound(self, case: FeedCase) -> float:
        return self.tolerance if self.tolerance is not None else default_bound(self.sig.float_type, case)

    def chosen(self, names: Sequence[str]) -> list[str]:
        if not self.outputs:
            return list(names)
        return [n for n in names if any(fnmatch.fnmatchcase(n, pattern) for pattern in self.outputs)]

    @staticmethod
    def info(case: FeedCase) -> dict[str, Any]:
        return dict(axes={"batch": case.batch, "seq": case.seq, "past": case.past}, largest_position=case.past + case.seq - 1)

    def crashed(self, runtime: str, role: str, crash: RuntimeCrash) -> None:
        """Every case fails: the runner died loading the model (or its reference or original)."""
        for case in self.cases:
            self.report.results.append(CaseResult(self.label, case.label, runtime, "error", message=f"the {role} cannot load: {crash}",
                                                  **self.info(case)))
            self.advance(1)

    def judge(self, runtime: str, case: FeedCase, got: Attempt, ref: Attempt, original: Attempt | None) -> None:
        (out, model_fails), (expected, ref_fails) = got, ref
        info = self.info(case)
        if out is None:
            self.report.results.append(CaseResult(self.label, case.label, runtime, "error", message=f"the model fails: {model_fails}", **info))
            return
        for output in self.chosen(sorted(out)):
            slot, why = self.oracle.slot(output)
            if slot is not None and expected is None:
                why = f"the reference fails: {ref_fails}"
            elif slot is not None and slot not in expected:
                why = f"{self.oracle.label} has no output {slot!r}"
            value = None
            if not why:
                value, why = aligned(np.asarray(out[output]), expected[slot], output)
            if why:
                self.report.not_compared.append(NotCompared(self.label, case.label, runtime, output, why))
                continue
            cmp = compare(value, expected[slot], self.bound(case))
            message = "" if cmp.passed else f"error {cmp.normalised:.2e} > tolerance {cmp.bound:.3g} (max abs {cmp.max_abs:.2e})"
            before = self.original_outcome(original, output, slot, expected, case) if original is not None else ""
            self.report.results.append(CaseResult(self.label, case.label, runtime, "pass" if cmp.passed else "fail", cmp, message,
                                                  output=output, original=before, **info))

    def original_outcome(self, original: Attempt, output: str, slot: str, expected: Mapping[str, np.ndarray], case: FeedCase) -> str:
        """The original model's error on the same output, or how it failed."""
        out, fails = original
        if out is None:
            return f"fails: {fails}"
        if output not in out:
            return "no such output"
        value, why = aligned(np.asarray(out[output]), expected[slot], output)
        return why or f"{compare(value, expected[slot], self.bound(case)).normalised:.2e}"


def default_bound(float_type: str, case: FeedCase) -> float:
    """TOLERANCE for a float32 model; ROUNDOFF_UNITS · u · √(past + seq) for a float16 or bfloat16 one."""
    if float_type not in ROUNDOFF:
        return TOLERANCE
    return ROUNDOFF_UNITS * ROUNDOFF[float_type] * math.sqrt(case.past + case.seq)


def default_label(float_type: str) -> float | str:
    """default_bound as the report's settings show it."""
    if float_type not in ROUNDOFF:
        return TOLERANCE
    return f"{ROUNDOFF_UNITS}·2^{int(math.log2(ROUNDOFF[float_type]))}·√(past + seq) ({float_type})"


def load(runtime: Runtime, path: Path, timeout: float = DEFAULT_TIMEOUT) -> tuple[ModelSession | None, str]:
    """The model in a child process (runtimes.isolated), each load and run within ``timeout`` seconds: a
    runtime that dies loading it, or runs past the deadline, raises RuntimeCrash."""
    return opened(runtime, lambda: runtime.supports_model(path), lambda: IsolatedModelSession(runtime, path, timeout=timeout), path.name)


def run_on(run: ModelRun, runtime: Runtime, model: Path, original: Path | None, hf_outputs: dict[int, Attempt],
           timeout: float = DEFAULT_TIMEOUT) -> None:
    """Every case on one runner: the model, its per-runner reference and original, loaded once each. A
    runner that cannot load one is unavailable; one that dies loading it fails every case, saying so."""
    sessions: dict[str, ModelSession] = {}
    for role, path in (("model", model), ("reference", run.oracle.reference), ("original", original)):
        if path is None:
            continue
        try:
            session, why = load(runtime, path, timeout)
        except RuntimeCrash as crash:
            run.report.runtimes[runtime.name] = runtime.description
            run.crashed(runtime.name, role, crash)
            return
        if session is None:
            run.report.unavailable[runtime.name] = why if role == "model" else f"the {role} cannot run: {why}"
            return
        sessions[role] = session
    run.report.runtimes[runtime.name] = runtime.description
    for index, case in enumerate(run.cases):
        why = misfit(run.sig, case)
        if why:  # not the model's fault, nor a pass: a one-token decode step cannot take a prompt
            run.report.not_compared.append(NotCompared(run.label, case.label, runtime.name, "every output", why))
            run.advance(1)
            continue
        feeds = make_feeds(run.sig, case, run.seed + index)
        if run.oracle.run is not None:
            ref = hf_outputs.get(index) or hf_outputs.setdefault(index, attempt(run.oracle.run, feeds))
        else:
            ref = attempt(sessions["reference"].run, feeds)
        before = attempt(sessions["original"].run, feeds) if "original" in sessions else None
        run.judge(runtime.name, case, attempt(sessions["model"].run, feeds), ref, before)
        run.advance(1)


def model_parity(model: str | Path, against: str | Path | None = None, *, against_hf: str | Path | None = None,
                 oracle: Runner | None = None,
                 cases: Sequence[FeedCase] = (FeedCase(16),), runtimes: Sequence[str] = DEFAULT_RUNTIMES,
                 tolerance: float | None = None, seed: int = 0, dims: Mapping[str, int] | None = None,
                 outputs: Sequence[str] | None = None, original: str | Path | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> Report:
    """``model`` against ``against`` (an ONNX model run on the same runner), ``against_hf`` (a
    transformers model folder, run in float64) or ``oracle`` (a float64 runner of one's own: feeds in,
    outputs out, named as HfOracle's; its ``label`` attribute names it), every case on every runner. An
    output passes when the model runs and its error is within ``tolerance`` (default: by the model's float type and
    the case's length, ``default_bound``); with ``original`` (the model before a patch) each result also says how the original
    did. ``outputs`` are names or glob patterns (default: all). Each load and run of a model on a runner has
    ``timeout`` seconds; past them its process is killed and the case fails, saying so."""
    if sum(x is not None for x in (against, against_hf, oracle)) != 1:
        raise PosexportError("give exactly one of --against ORIGINAL.onnx and --against-hf DIR")
    if tolerance is not None and not valid_bound(tolerance):
        raise PosexportError(f"--tolerance {tolerance!r}: expected a positive finite number")
    model = Path(model)
    check_timeout(timeout)
    chosen = [get_runtime(name) for name in runtimes]
    warm()  # the runners' fork server starts while the model, its reference and the oracle are read
    sig = signature(model, dims)
    check_cases(sig, list(cases), seed)
    for other in (against, original):  # checked as the model is, before any runtime opens them
        if other is not None:
            checked_model(other)
    unmatched = [p for p in outputs or () if not any(fnmatch.fnmatchcase(name, p) for name in sig.outputs)]
    if unmatched:
        raise PosexportError(f"--outputs {','.join(unmatched)}: matches no output of {model.name} ({', '.join(sig.outputs)})")
    if against is not None:
        judge = Oracle(str(against), reference=Path(against))
    elif against_hf is not None:
        hf = HfOracle(against_hf)
        judge = Oracle(hf.label, run=hf.run)
    else:
        judge = Oracle(getattr(oracle, "label", "a float64 runner"), run=oracle)
    shown = tolerance if tolerance is not None else default_label(sig.float_type)
    report = Report(settings={"seed": seed, "tolerance": shown, "cases": [c.label for c in cases],
                              "outputs": list(outputs or [])})
    report.graphs[model.name] = {"kind": "model", "model": str(model), "reference": judge.label,
                                 "original": str(original) if original else None}
    run = ModelRun(model.name, judge, sig, list(cases), tolerance, seed, list(outputs or []) or None, report)
    hf_outputs: dict[int, Attempt] = {}
    # One runner's sessions at a time: each loads from the path, and goes before the next one's are made.
    with progress("model-parity", len(chosen) * len(cases), " cases") as run.advance:
        for runtime in chosen:
            run_on(run, runtime, model, Path(original) if original is not None else None, hf_outputs, timeout)
    return report
