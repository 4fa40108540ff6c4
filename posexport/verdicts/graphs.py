"""Graph parity: run built graphs on the runners and judge every output against the float64 oracle.

For each graph: the encoding's seeded sweep of cases (lengths past the trained length and the cached
rows, decode steps, random offsets), each case's feeds made once and handed byte-identical to every
runtime, each output compared with the oracle; optionally every pair of runtimes with each other; then
the encoding's declared properties checked on each runtime's outputs. Running lives in
posexport.runtimes, rendering in posexport.reports; this module only makes inputs, compares and records.
The tolerance rule (docs/numerics.md): max|out − ref| / max(1, max|ref|) ≤ the dtype's bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..comparison import PAIRWISE_FACTOR, compare
from ..contract import Artifact, Case, Property
from ..dtypes import DTYPES
from ..errors import PosexportError, one_line
from ..runtimes import RUNTIMES, Runtime
from ..runtimes.isolated import RuntimeCrash
from .outputs import SAVED, Outputs, feeds_digest
from .report import CaseResult, Comparison, PropertyOutcome, Report
from .runners import get_runtime

# Property checks draw their inputs from generators seeded apart from the sweep's.
PROPERTY_STREAM = 1_000_003

Progress = Callable[[int, int, str], None]
Tolerance = float | Mapping[str, float] | None


# --- judging one output -----------------------------------------------------------------------------


def judge(run: Callable[[Mapping[str, np.ndarray]], np.ndarray], feeds: Mapping[str, np.ndarray], ref: np.ndarray,
          bound: float) -> tuple[dict[str, Any], np.ndarray | None]:
    """Run once and compare: the CaseResult fields (status, comparison, message) and the output."""
    try:
        out = np.asarray(run(feeds))
    except Exception as e:
        return dict(status="error", message=describe(e)), None
    cmp = compare(out, ref, bound)
    message = "" if cmp.passed else f"error {cmp.normalised:.2e} > bound {cmp.bound:.1e} (max abs {cmp.max_abs:.2e})"
    if out.shape != ref.shape:
        message = f"output shape {out.shape} != expected {ref.shape}"
    return dict(status="pass" if cmp.passed else "fail", comparison=cmp, message=message), out


def describe(error: BaseException) -> str:
    """A runtime's failure as one line of a report: its type and the start of its message."""
    return f"{type(error).__name__}: {one_line(error, 300)}"


# --- tolerances -------------------------------------------------------------------------------------


def bound_for(artifact: Artifact, feeds: Mapping[str, np.ndarray], tolerance: Tolerance) -> float:
    """The bound on max|out − ref| / max(1, max|ref|) for this case: the dtype's (grown with log2 of the
    largest position for float32 position-scaled outputs, docs/numerics.md), unless the run overrides it
    for every dtype or per dtype."""
    dtype = artifact.options.dtype
    if isinstance(tolerance, (int, float)):
        return float(tolerance)
    if isinstance(tolerance, Mapping) and dtype.name in tolerance:
        return float(tolerance[dtype.name])
    enc, p = artifact.encoding, artifact.params
    largest = enc.largest_position(p, feeds) if enc.position_scaled_tolerance else None
    return dtype.bound(largest)


def parse_tolerance(text: str | None) -> Tolerance:
    """`--tolerance 1e-5` (every dtype) or `--tolerance float16=5e-3,bfloat16=4e-2`."""
    if not text:
        return None
    error = PosexportError(
        f"--tolerance {text!r}: expected a positive finite number, or DTYPE=NUMBER pairs such as float16=5e-3,bfloat16=4e-2"
    )
    pairs = [item.partition("=") for item in text.split(",")] if "=" in text else [("", "", text)]
    out: dict[str, float] = {}
    for name, _, value in pairs:
        try:
            number = float(value)
        except ValueError:
            raise error from None
        if not valid_bound(number) or (name.strip() not in DTYPES and "=" in text):
            raise error
        out[name.strip()] = number
    return out if "=" in text else out[""]


def valid_bound(number: Any) -> bool:
    return isinstance(number, (int, float)) and not isinstance(number, bool) and 0 < number < math.inf


def check_settings(tolerance: Tolerance, seed: Any) -> None:
    """A run's tolerance (a positive finite bound, overall or per dtype) and seed (a non-negative integer),
    checked before anything runs: an infinite or NaN bound would pass every output."""
    bounds = tolerance.items() if isinstance(tolerance, Mapping) else [("", tolerance)] if tolerance is not None else []
    for name, bound in bounds:
        if not valid_bound(bound) or (name and name not in DTYPES):
            raise PosexportError(f"--tolerance {name + '=' if name else ''}{bound!r}: expected a positive finite number"
                                 + (f" for a dtype ({', '.join(DTYPES)})" if name else ""))
    if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
        raise PosexportError(f"--seed {seed!r}: expected a non-negative integer")


# --- runtimes and sessions --------------------------------------------------------------------------


def resolve_runtimes(runtimes: Sequence[str | Runtime] | None) -> list[Runtime]:
    """Runtime names (checked before anything runs) or Runtime objects; default: every registered one that
    runs by default (not those that start a browser)."""
    chosen = [get_runtime(r) if isinstance(r, str) else r for r in (runtimes or [rt for rt in RUNTIMES.values() if rt.runs_by_default])]
    names = [r.name for r in chosen]
    if len(set(names)) != len(names):
        raise PosexportError(f"--runtimes {','.join(names)}: a runtime is named twice")
    return chosen


def opened(rt: Runtime, supports: Callable[[], tuple[bool, str]], load: Callable[[], Any], what: str) -> tuple[Any, str]:
    """(session, "") when the runtime is available, supports the subject and loads it, else (None, why not).
    A runtime that dies loading it (RuntimeCrash) is the subject's failure, not an unavailable runtime."""
    ok, why = rt.available()
    if ok:
        ok, why = supports()
    if not ok:
        return None, why
    try:
        return load(), ""
    except RuntimeCrash:
        raise
    except PosexportError as e:  # a refusal already says what and why (transformers code that moved, a budget)
        return None, str(e)
    except Exception as e:  # a runtime that cannot load the subject says so; the run goes on
        return None, f"failed to load {what}: {describe(e)}"


def open_session(rt: Runtime, art: Artifact) -> tuple[Any, str]:
    """(session, "") when the runtime can run this graph, else (None, why not)."""
    return opened(rt, lambda: rt.supports(art), lambda: rt.load(art), "the graph")


def load_sessions(art: Artifact, chosen: list[Runtime], report: Report) -> dict[str, tuple[Runtime, Any]]:
    """A session per runtime that can run this graph; the others are recorded with their reason."""
    sessions = {}
    for rt in chosen:
        session, why = open_session(rt, art)
        if session is None:
            previous = report.unavailable.get(rt.name)
            report.unavailable[rt.name] = why if previous in (None, why) else f"{previous}; {why}"
            continue
        sessions[rt.name] = (rt, session)
        report.runtimes[rt.name] = rt.description
        caveat = rt.caveats(art)
        if caveat:
            report.notes[rt.name] = caveat
    return sessions


def check_property(label: str, prop: Property, name: str, runtime: Runtime, session: Any, art: Artifact,
                   rng: np.random.Generator) -> PropertyOutcome:
    try:
        result = prop.check(session.run, art.params, art.options.dtype, rng)
    except Exception as e:
        return PropertyOutcome(label, prop.name, name, "error", describe(e), float("inf"))
    if result.ok:
        return PropertyOutcome(label, prop.name, name, "pass", result.detail, result.error)
    known = getattr(runtime, "limitations", {}).get(prop.name)
    if known:
        return PropertyOutcome(label, prop.name, name, "limitation", f"{result.detail} — known limitation: {known}", result.error)
    return PropertyOutcome(label, prop.name, name, "fail", result.detail, result.error)


def graph_label(artifact: Artifact) -> str:
    """encoding-dtype; a graph built --from-model is named by its role (gemma3's rope-local, rope-global)."""
    role = (artifact.manifest.get("model") or {}).get("role")
    return f"{role or artifact.encoding.name}-{artifact.options.dtype.name}"


def runtime_bound(runtime: Runtime, art: Artifact, feeds: Mapping[str, np.ndarray], bound: float) -> float:
    """A runtime that runs no graph but the model's own code (hf) judges with its own bound."""
    own = getattr(runtime, "bound", None)
    return own(art, feeds, bound) if own else bound


# --- the run ----------------------------------------------------------------------------------------


@dataclass
class Plan:
    """One graph's part of a run: its sessions, its sweep and its properties."""

    art: Artifact
    label: str
    sessions: dict[str, tuple[Runtime, Any]]
    cases: list[Case]
    props: list[Property]

    @property
    def steps(self) -> int:
        graph_runners = sum(runtime.runs_graph_properties for runtime, _ in self.sessions.values())
        return len(self.cases) * max(1, len(self.sessions)) + len(self.props) * graph_runners


@dataclass
class Sweep:
    """The state of one run: its settings, the report it fills and the outputs it keeps."""

    report: Report
    seed: int
    tolerance: Tolerance
    pairwise: bool
    keep_outputs: bool
    saved: Outputs | None
    progress: Progress | None
    total: int = 0
    done: int = 0
    outputs: Outputs = field(default_factory=Outputs)

    def step(self, what: str) -> None:
        self.done += 1
        if self.progress:
            self.progress(self.done, self.total, what)

    def plan(self, art: Artifact, chosen: list[Runtime], seqs: tuple[int, ...] | None, batches: tuple[int, ...] | None,
             properties: bool) -> Plan:
        label = graph_label(art)
        self.report.graphs[label] = art.manifest
        self.outputs.graphs[label] = art.manifest.get("sha256", "")
        if self.saved is not None:
            self.saved.check_graph(label, self.outputs.graphs[label])
        sessions = load_sessions(art, chosen, self.report)
        props = art.encoding.properties(art.params) if properties else []
        return Plan(art, label, sessions, art.encoding.cases(art.params, seqs, batches), props)

    def run_case(self, plan: Plan, index: int, case: Case) -> None:
        """One case on every session (and every saved output of it), then the pairs."""
        enc, p, label = plan.art.encoding, plan.art.params, plan.label
        feeds = enc.feeds(p, case, plan.art.options.dtype, np.random.default_rng([self.seed, index]))
        digest = feeds_digest(feeds)
        self.outputs.digests[(label, case.label)] = digest
        ref = np.asarray(enc.reference(p, feeds), dtype=np.float64)
        bound = bound_for(plan.art, feeds, self.tolerance)
        info = dict(axes=dict(case.axes), largest_position=enc.largest_position(p, feeds))
        here: dict[str, np.ndarray] = {}
        bounds = {name: runtime_bound(runtime, plan.art, feeds, bound) for name, (runtime, _) in plan.sessions.items()}
        for name, (_, session) in plan.sessions.items():
            result, out = judge(session.run, feeds, ref, bounds[name])
            self.report.results.append(CaseResult(label, case.label, name, **result, **info))
            if out is not None:
                here[name] = out
            self.step(f"{label} {case.label} on {name}")
        if not plan.sessions:
            self.step(f"{label} {case.label}")
        for name, out in self.saved.for_case(label, case.label, digest) if self.saved is not None else ():
            result, _ = judge(lambda _, out=out: out, feeds, ref, bound)
            self.report.results.append(CaseResult(label, case.label, name, **result, **info))
            here[name] = out
        self.compare_pairs(label, case, here, bounds, bound, info)
        if self.keep_outputs:
            self.outputs.arrays |= {(label, case.label, name): out for name, out in here.items() if not name.endswith(SAVED)}

    def compare_pairs(self, label: str, case: Case, here: dict[str, np.ndarray], bounds: dict[str, float], bound: float,
                      info: dict[str, Any]) -> None:
        if not self.pairwise:
            return
        for a, b in itertools.combinations(sorted(here), 2):
            pair_bound = PAIRWISE_FACTOR * max(bounds.get(a, bound), bounds.get(b, bound))
            cmp = compare(here[a], here[b].astype(np.float64), pair_bound)
            status = "pass" if cmp.passed else "fail"
            self.report.pairwise.append(CaseResult(label, case.label, f"{a} vs {b}", status, cmp, **info))

    def check_properties(self, plan: Plan) -> None:
        """Properties are checks of a graph: a runner of the model's own code (hf) is judged by the
        model-agreement bound of its cases, never by them."""
        graph_runners = {n: s for n, s in plan.sessions.items() if s[0].runs_graph_properties}
        for k, prop in enumerate(plan.props):
            for name, (runtime, session) in graph_runners.items():
                rng = np.random.default_rng([self.seed, PROPERTY_STREAM, k])
                self.report.properties.append(check_property(plan.label, prop, name, runtime, session, plan.art, rng))
                self.step(f"{plan.label} {prop.name} on {name}")


def run_parity(
    artifacts: Artifact | Sequence[Artifact],
    runtimes: Sequence[str | Runtime] | None = None,
    *,
    seqs: tuple[int, ...] | None = None,
    batches: tuple[int, ...] | None = None,
    seed: int = 0,
    tolerance: Tolerance = None,
    pairwise: bool = False,
    properties: bool = True,
    progress: Progress | None = None,
    keep_outputs: bool = False,
    saved: Outputs | None = None,
) -> Report:
    """Every case of each graph's sweep on every runtime, judged against the float64 oracle; then the
    encoding's properties on each runtime. With ``keep_outputs`` the report carries the outputs; with
    ``saved`` the outputs another run saved are judged too."""
    graphs = [artifacts] if isinstance(artifacts, Artifact) else list(artifacts)
    check_settings(tolerance, seed)
    chosen = resolve_runtimes(runtimes)
    report = Report(settings={"seed": seed, "seqs": list(seqs or ()), "batches": list(batches or ()),
                              "tolerance": tolerance, "pairwise": pairwise})
    sweep = Sweep(report, seed, tolerance, pairwise, keep_outputs, saved, progress)
    plans = [sweep.plan(art, chosen, seqs, batches, properties) for art in graphs]
    sweep.total = sum(plan.steps for plan in plans)
    for plan in plans:
        for index, case in enumerate(plan.cases):
            sweep.run_case(plan, index, case)
        sweep.check_properties(plan)
    if saved is not None and not any(r.runtime.endswith(SAVED) for r in report.results):
        raise PosexportError("--load-outputs: no saved output matches this run's graphs and cases; use the same graph, "
                             "--seqs and --batches as the saving run")
    if keep_outputs:
        report.outputs = sweep.outputs
    return report
