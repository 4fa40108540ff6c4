"""Whole-model parity: a model against its oracle, on the same runners as graph parity.

The oracle is a second ONNX model run on the same runner (the original, or the model before a patch), or
the transformers model in float64 (hf_oracle). Each case's feeds (model_feeds: a prompt cut from real
text where a tokenizer is found, tokens.py) are made once and handed to every side; every output the
oracle can produce is compared (logits, and each layer's key and value cache, mapped by layer whatever
the exporter calls them; a sliding layer's on the last rows both sides keep), and an output it cannot
produce is reported as not compared, with the reason, never as a pass or a failure.

Against transformers, the bound knows the model: on the same feeds, transformers' own float32 forward
(cos/sin from float64 angles) is measured against float64, its **floor**, and an output passes within
max(absolute bound, FLOOR_FACTOR · floor). Logits are compared block by block as the runtime's child
sends them (streamed.py), never held whole, and reduced to the error, its position and each position's
next-token agreement. ``generate`` decodes greedily through the model's own cache (generate.py).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..comparison import FLOOR_FACTOR, ROUNDOFF, ROUNDOFF_UNITS, TOLERANCE
from ..contract import DEFAULT_MODEL_RUNTIMES
from ..errors import PosexportError
from ..progress import progress
from ..runtimes import ModelSession, Runtime
from ..runtimes.isolated import DEFAULT_TIMEOUT, IsolatedModelSession, RuntimeCrash, check_timeout, warm
from .generate import generation
from .graphs import describe, opened, valid_bound
from .hf_oracle import Expected, HfOracle, expected_of, output_slot
from .model_feeds import (UNKNOWN_VOCABULARY, FeedCase, Signature, check_cases, checked_model, make_feeds, misfit, signature,
                          takes_feeds_of)
from .report import CaseResult, NotCompared, Report
from .runners import get_runtime
from .streamed import Running, TokenTally, compared
from .tokens import Tokens, token_source

# The defaults and bounds live in the light layers, so that `posexport model-parity --help` shows them without
# importing a runtime.
DEFAULT_RUNTIMES = DEFAULT_MODEL_RUNTIMES
# A run's outputs, or None and the runner's message.
Attempt = tuple["dict[str, np.ndarray] | None", str]
Runner = Callable[[Mapping[str, np.ndarray]], dict[str, np.ndarray]]


def attempt(run: Callable[[], dict[str, np.ndarray]]) -> Attempt:
    try:
        return run(), ""
    except Exception as e:  # a runtime's own error is the result we report (e.g. a cache too short)
        return None, describe(e).split("Status Message: ")[-1]


@dataclass
class Oracle:
    """What the model is judged against: a ``reference`` model, loaded on each runner; otherwise one
    runner-independent oracle made once per case: the transformers model (``hf``, with the float32
    ``floor`` beside it) or a caller's float64 ``run``, its outputs named as HfOracle's ('logits',
    'key.L', 'value.L')."""

    label: str
    reference: Path | None = None
    hf: HfOracle | None = None
    floor: HfOracle | None = None
    run: Runner | None = None

    def slot(self, output: str) -> tuple[str | None, str]:
        """The oracle's name for a model output, or None and why it cannot produce it."""
        if self.reference is not None:
            return output, ""
        slot = output_slot(output)
        if slot is None:
            return None, f"{self.label} gives logits and key/value caches; {output!r} is neither"
        return slot, ""

    def expect(self, feeds: Mapping[str, np.ndarray]) -> Expected:
        return self.hf.expect(feeds) if self.hf is not None else expected_of(self.run(feeds))


@dataclass
class Truth:
    """The oracle's answer to one case (or how it failed), and the floor of each output."""

    expected: Expected | None
    failure: str = ""
    floors: dict[str, float] = field(default_factory=dict)


def floors_of(exact: Expected, floor: Expected) -> dict[str, float]:
    """The float32 model's error against the float64 one, per output, logits block by block."""
    out = {slot: compared(floor.arrays[slot], array).normalised for slot, array in exact.arrays.items() if slot in floor.arrays}
    shape = exact.shape("logits")
    if shape is not None and floor.shape("logits") == shape:
        running, rows = Running(), int(np.prod(shape[:-1]))
        step = rows_per_block(shape[-1])
        for start in range(0, rows, step):
            stop = min(start + step, rows)
            running.add(floor.logits_rows(start, stop), exact.logits_rows(start, stop), start)
        out["logits"] = running.normalised
    return out


def rows_per_block(width: int) -> int:
    """Rows of ``width`` values making 8 MB in float64: the size the comparisons work in."""
    return max(1, (1 << 20) // max(width, 1))


class Streamed:
    """A logits output taken as the runtime's child sends it (a Sink of runtimes.isolated): each block of
    rows compared with the oracle's same rows, and next-token agreement tallied; nothing else kept."""

    def __init__(self, expected: Expected | None, case: FeedCase, slot: str = "logits", tally: bool = True):
        self.expected, self.case, self.slot, self.with_tally = expected, case, slot, tally
        self.running: Running | None = None
        self.tally: TokenTally | None = None

    def __call__(self, shape: tuple[int, ...], dtype: np.dtype) -> Callable[[int, np.ndarray], None]:
        period = shape[-2] if len(shape) >= 2 else 1
        self.running = Running(period, self.case.past + self.case.seq - period)
        self.tally = TokenTally(period, self.case.past + self.case.seq - period) if self.with_tally else None
        if self.expected is None or self.slot not in self.expected.slots():
            return lambda start, block: None
        if self.expected.shape(self.slot) != shape:
            self.running.mismatch = True
            return lambda start, block: None
        return self.take

    def take(self, start: int, block: np.ndarray) -> None:
        step = rows_per_block(block.shape[-1])  # the float64 temporaries stay a few of these rows
        for first in range(0, len(block), step):
            rows = block[first:first + step]
            ref = self.expected.logits_rows(start + first, start + first + len(rows), self.slot)
            self.running.add(rows, ref, start + first)
            if self.tally is not None:
                self.tally.add(rows, ref, start + first)


def layer_of(slot: str) -> int | None:
    parts = slot.split(".")
    return int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else None


def aligned(out: np.ndarray, ref: np.ndarray, output: str, sliding: frozenset[int] = frozenset(),
            slot: str = "") -> tuple[np.ndarray | None, np.ndarray | None, str]:
    """The model's output and the oracle's in one layout, and how they were aligned: [batch, heads, seq,
    head_dim] caches may come as [batch, seq, heads, head_dim]; a sliding layer's cache is compared on the
    last rows both keep (transformers keeps window − 1 of them, an export often all). None, None and why
    when they cannot be aligned (logits never are: a wrong shape of logits is a failure)."""
    if out.shape == ref.shape or output.endswith("logits"):
        return out, ref, ""
    layouts = [out] + ([out.transpose(0, 2, 1, 3)] if out.ndim == 4 else [])
    for value in layouts:
        if value.shape == ref.shape:
            return value, ref, ""
    if layer_of(slot) in sliding:
        for value in layouts:
            if value.ndim == 4 and value.shape[:2] == ref.shape[:2] and value.shape[3] == ref.shape[3]:
                k = min(value.shape[2], ref.shape[2])
                return (value[:, :, value.shape[2] - k:], ref[:, :, ref.shape[2] - k:],
                        f"the last {k} rows: a sliding layer (the model keeps {value.shape[2]} rows, transformers {ref.shape[2]})")
    return None, None, f"shape {list(out.shape)} cannot be aligned with the oracle's {list(ref.shape)}"


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
    tokens: Tokens = field(default_factory=lambda: Tokens(None, "random token ids"))
    floor_factor: float = FLOOR_FACTOR
    generate: int = 0
    advance: Callable[[float], None] = lambda n: None
    truths: dict[int, Truth] = field(default_factory=dict)

    def bound(self, case: FeedCase, floor: float | None = None) -> float:
        absolute = self.tolerance if self.tolerance is not None else default_bound(self.sig.float_type, case)
        return max(absolute, self.floor_factor * floor) if floor is not None and math.isfinite(floor) else absolute

    def chosen(self, names: Sequence[str]) -> list[str]:
        if not self.outputs:
            return list(names)
        return [n for n in names if any(fnmatch.fnmatchcase(n, pattern) for pattern in self.outputs)]

    def feeds(self, index: int, case: FeedCase) -> dict[str, np.ndarray]:
        return make_feeds(self.sig, case, self.seed + index, self.tokens)

    def truth(self, index: int, feeds: Mapping[str, np.ndarray]) -> Truth:
        """The runner-independent oracle's answer to case ``index``, made once, with the floor."""
        if index not in self.truths:
            exact, failure = attempt(lambda: self.oracle.expect(feeds))
            truth = Truth(exact, failure)
            if exact is not None and self.oracle.floor is not None and self.floor_factor > 0:
                floor, why = attempt(lambda: self.oracle.floor.expect(feeds))
                truth.floors = floors_of(exact, floor) if floor is not None else {}
                if floor is None:  # no floor: the absolute bound alone, and the report says why
                    self.report.notes["floor"] = f"{self.oracle.floor.label} fails on {self.cases[index].label}: {why}"
            self.truths[index] = truth
        return self.truths[index]

    @staticmethod
    def info(case: FeedCase) -> dict[str, Any]:
        return dict(axes={"batch": case.batch, "seq": case.seq, "past": case.past}, largest_position=case.past + case.seq - 1)

    def crashed(self, runtime: str, role: str, crash: RuntimeCrash) -> None:
        """Every case fails: the runner died loading the model (or its reference or original)."""
        for case in self.cases:
            self.report.results.append(CaseResult(self.label, case.label, runtime, "error", message=f"the {role} cannot load: {crash}",
                                                  **self.info(case)))
            self.advance(1)

    def not_compared(self, case: FeedCase, runtime: str, output: str, why: str) -> None:
        self.report.not_compared.append(NotCompared(self.label, case.label, runtime, output, why))

    def judge(self, runtime: str, case: FeedCase, got: Attempt, truth: Truth, streamed: Mapping[str, Streamed],
              original: tuple[Attempt, Mapping[str, Streamed]] | None) -> None:
        out, model_fails = got
        if out is None:
            self.report.results.append(CaseResult(self.label, case.label, runtime, "error", message=f"the model fails: {model_fails}",
                                                  **self.info(case)))
            return
        for output in self.chosen(sorted(set(out) | {n for n, s in streamed.items() if s.running is not None})):
            slot, why = self.oracle.slot(output)
            expected = truth.expected
            if slot is not None and expected is None:
                why = f"the reference fails: {truth.failure}"
            elif slot is not None and slot not in expected.slots():
                why = f"{self.oracle.label} has no output {slot!r}"
            if why:
                self.not_compared(case, runtime, output, why)
                continue
            running, tally, note, why = self.measured(output, slot, out, streamed, expected, case)
            if why:
                self.not_compared(case, runtime, output, why)
                continue
            self.record(runtime, case, output, slot, running, tally, note, truth, original)

    def measured(self, output: str, slot: str, out: Mapping[str, np.ndarray], streamed: Mapping[str, Streamed],
                 expected: Expected, case: FeedCase) -> tuple[Running | None, TokenTally | None, str, str]:
        """(the comparison, the token tally, how it was aligned, why it could not be) of one output."""
        if output in streamed:
            return streamed[output].running, streamed[output].tally, "", ""
        value, ref, note = aligned(np.asarray(out[output]), expected.arrays[slot], output, expected.sliding, slot)
        if value is None:
            return None, None, "", note
        return compared(value, ref, case.past + case.seq - ref.shape[-2] if ref.ndim >= 2 else None), None, note, ""

    def record(self, runtime: str, case: FeedCase, output: str, slot: str, running: Running, tally: TokenTally | None,
               note: str, truth: Truth, original: tuple[Attempt, Mapping[str, Streamed]] | None) -> None:
        floor = truth.floors.get(slot)
        cmp = running.comparison(self.bound(case, floor))
        message = "" if cmp.passed else f"error {cmp.normalised:.2e} > bound {cmp.bound:.3g} (max abs {cmp.max_abs:.2e})"
        before = self.original_outcome(original, output, slot, truth.expected, case) if original is not None else ""
        self.report.results.append(CaseResult(
            self.label, case.label, runtime, "pass" if cmp.passed else "fail", cmp, message, output=output, original=before,
            floor=floor, position=running.position, tokens=tally.result() if tally is not None else None, note=note,
            **self.info(case)))

    def original_outcome(self, original: tuple[Attempt, Mapping[str, Streamed]], output: str, slot: str, expected: Expected,
                         case: FeedCase) -> str:
        """The original model's error on the same output, or how it failed."""
        (out, fails), streamed = original
        if out is None:
            return f"fails: {fails}"
        if output in streamed and streamed[output].running is not None:
            return f"{streamed[output].running.normalised:.2e}"
        if output not in out:
            return "no such output"
        value, ref, how = aligned(np.asarray(out[output]), expected.arrays[slot], output, expected.sliding, slot)
        return how if value is None else f"{compared(value, ref).normalised:.2e}"


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


def logits_sinks(run: ModelRun, expected: Expected | None, case: FeedCase, tally: bool = True) -> dict[str, Streamed]:
    """A Streamed per logits output: compared as it comes when chosen, else only drained (never held)."""
    chosen = set(run.chosen(run.sig.outputs))
    return {name: Streamed(expected if name in chosen else None, case, run.oracle.slot(name)[0] or "logits", tally)
            for name in run.sig.outputs if name.endswith("logits")}


def streamed_run(session: ModelSession, feeds: Mapping[str, np.ndarray], sinks: Mapping[str, Streamed]) -> Attempt:
    return attempt(lambda: session.run(feeds, sinks))


def run_case(run: ModelRun, runtime: Runtime, sessions: Mapping[str, ModelSession], index: int, case: FeedCase) -> None:
    """One case on one runner: the oracle's answer, the model's outputs compared as they come, the original's."""
    feeds = run.feeds(index, case)
    if "reference" in sessions:
        ref = attempt(lambda: sessions["reference"].run(feeds))
        truth = Truth(expected_of(ref[0]) if ref[0] is not None else None, ref[1])
    else:
        truth = run.truth(index, feeds)
    streams = logits_sinks(run, truth.expected, case)
    got = streamed_run(sessions["model"], feeds, streams)
    original = None
    if "original" in sessions:
        before = logits_sinks(run, truth.expected, case, tally=False)
        original = (streamed_run(sessions["original"], feeds, before), before)
    run.judge(runtime.name, case, got, truth, streams, original)
    if run.generate and case.past == 0 and case.batch == 1:
        if run.oracle.hf is None:
            run.not_compared(case, runtime.name, "generation", f"--generate needs --against-hf: {run.oracle.label} cannot decode")
        elif run.tokens.ids is not None or run.sig.vocab:
            run.report.generations.append(generation(run.label, runtime.name, sessions["model"], run.sig, case,
                                                     run.oracle.hf, feeds, run.generate, run.tokens))


def run_on(run: ModelRun, runtime: Runtime, model: Path, original: Path | None, timeout: float = DEFAULT_TIMEOUT) -> None:
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
    if runtime.caveats_model(model):
        run.report.notes[runtime.name] = runtime.caveats_model(model)
    for index, case in enumerate(run.cases):
        why = misfit(run.sig, case)
        if why:  # not the model's fault, nor a pass: a one-token decode step cannot take a prompt
            run.not_compared(case, runtime.name, "every output", why)
        else:
            run_case(run, runtime, sessions, index, case)
        run.advance(1)


def make_oracle(against: str | Path | None, against_hf: str | Path | None, oracle: Runner | HfOracle | None,
                floor_factor: float) -> Oracle:
    if sum(x is not None for x in (against, against_hf, oracle)) != 1:
        raise PosexportError("give exactly one of --against ORIGINAL.onnx and --against-hf DIR")
    if against is not None:
        return Oracle(str(against), reference=Path(against))
    if against_hf is not None or isinstance(oracle, HfOracle):
        hf = oracle if isinstance(oracle, HfOracle) else HfOracle(against_hf)
        floor = HfOracle(hf.directory, "float32") if floor_factor > 0 else None
        return Oracle(hf.label, hf=hf, floor=floor)
    return Oracle(getattr(oracle, "label", "a float64 runner"), run=oracle)


def check_options(tolerance: float | None, floor_factor: float, generate: int) -> None:
    if tolerance is not None and not valid_bound(tolerance):
        raise PosexportError(f"--tolerance {tolerance!r}: expected a positive finite number")
    if not (isinstance(floor_factor, (int, float)) and 0 <= floor_factor < math.inf):
        raise PosexportError(f"--floor-factor {floor_factor!r}: expected a number ≥ 0 (0: no floor)")
    if not (isinstance(generate, int) and 0 <= generate <= 1_000_000):
        raise PosexportError(f"--generate {generate!r}: expected a number of tokens ≥ 0")


def checked_tokens(sig: Signature, cases: Sequence[FeedCase], tokens: Tokens) -> None:
    """Every case can be cut from the ids (or drawn at random), before any runtime starts."""
    if tokens.ids is None:
        if not sig.vocab and any("input_ids" in name for name, _, _ in sig.inputs):
            raise PosexportError(UNKNOWN_VOCABULARY)
        return
    for case in cases:
        tokens.prompt(case.batch, case.seq, sig.vocab)


def model_parity(model: str | Path, against: str | Path | None = None, *, against_hf: str | Path | None = None,
                 oracle: Runner | HfOracle | None = None,
                 cases: Sequence[FeedCase] = (FeedCase(16),), runtimes: Sequence[str | Runtime] = DEFAULT_RUNTIMES,
                 tolerance: float | None = None, seed: int = 0, dims: Mapping[str, int] | None = None,
                 outputs: Sequence[str] | None = None, original: str | Path | None = None,
                 text: str | Path | None = None, tokens: str | Path | None = None, random_ids: bool = False,
                 generate: int = 0, floor_factor: float = FLOOR_FACTOR, timeout: float = DEFAULT_TIMEOUT) -> Report:
    """``model`` against ``against`` (an ONNX model run on the same runner), ``against_hf`` (a
    transformers model folder, run in float64) or ``oracle`` (an HfOracle, or a float64 runner of one's
    own: feeds in, outputs out, named as HfOracle's; its ``label`` attribute names it), every case on every
    runner. Prompts are cut from ``text`` (tokenized by the tokenizer.json of ``against_hf``, else of the
    model's folder), from ``tokens`` (.npy or a JSON list), from a default text where a tokenizer is
    found, else random ids (``random_ids`` asks for them). An output passes when the model runs and its
    error is within max(``tolerance``, ``floor_factor`` · floor) — the tolerance by default by the model's
    float type and the case's length (``default_bound``), the floor measured against transformers (0: no
    floor). With ``original`` (the model before a patch) each result also says how the original did.
    ``outputs`` are names or glob patterns (default: all). ``generate`` N decodes N tokens greedily after
    each prompt through the model's own cache, against transformers. Each load and run of a model on a runner
    has ``timeout`` seconds; past them its process is killed and the case fails, saying so."""
    check_options(tolerance, floor_factor, generate)
    check_timeout(timeout)
    model = Path(model)
    chosen = [get_runtime(r) if isinstance(r, str) else r for r in runtimes]
    warm()  # the runners' fork server starts while the model, its reference and the oracle are read
    sig = signature(model, dims)
    check_cases(sig, list(cases), seed)
    for option, other in (("--against", against), ("--original", original)):  # checked as the model is, before any runtime opens them
        if other is not None:
            takes_feeds_of(sig, checked_model(other), Path(other), option)
    unmatched = [p for p in outputs or () if not any(fnmatch.fnmatchcase(name, p) for name in sig.outputs)]
    if unmatched:
        raise PosexportError(f"--outputs {','.join(unmatched)}: matches no output of {model.name} ({', '.join(sig.outputs)})")
    folders = [Path(p) for p in (against_hf, getattr(oracle, "directory", None)) if p is not None] + [model.parent]
    ids = token_source(text, tokens, random_ids, folders)
    checked_tokens(sig, cases, ids)
    judge = make_oracle(against, against_hf, oracle, floor_factor)
    shown = tolerance if tolerance is not None else default_label(sig.float_type)
    report = Report(settings={"seed": seed, "tolerance": shown, "cases": [c.label for c in cases], "outputs": list(outputs or []),
                              "inputs": ids.description, "floor_factor": floor_factor if judge.floor is not None else None,
                              "floor_reference": judge.floor.label if judge.floor is not None else None, "generate": generate})
    report.graphs[model.name] = {"kind": "model", "model": str(model), "reference": judge.label,
                                 "original": str(original) if original else None}
    run = ModelRun(model.name, judge, sig, list(cases), tolerance, seed, list(outputs or []) or None, report, ids, floor_factor,
                   generate)
    # One runner's sessions at a time: each loads from the path, and goes before the next one's are made.
    with progress("model-parity", len(chosen) * len(cases), " cases") as run.advance:
        for runtime in chosen:
            run_on(run, runtime, model, Path(original) if original is not None else None, timeout)
    return report
