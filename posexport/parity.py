"""Parity: run built graphs on runtimes and judge every output against the float64 oracle (DESIGN 4.2).

For each graph: the encoding's seeded sweep of cases (lengths past the trained length and the cached
rows, decode steps, random offsets), each case's feeds made once and handed byte-identical to every
runtime, each output compared with the oracle; optionally every pair of runtimes with each other; then
the encoding's declared properties checked on each runtime's outputs. Running lives in
posexport.runtimes, rendering in posexport.reports; this module only makes inputs, compares and records.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PosexportError
from .contract import Artifact
from .files import atomic_write
from .runtimes import RUNTIMES, Runtime, get_runtime

# Two runtimes each within the bound of the truth can differ by twice the bound from each other.
PAIRWISE_FACTOR = 2.0
# Property checks draw their inputs from generators seeded apart from the sweep's.
PROPERTY_STREAM = 1_000_003


@dataclass(frozen=True)
class Comparison:
    max_abs: float
    # max|out − ref| / max(1, max|ref|): the error DESIGN 4.2 bounds, and so also the smallest tolerance
    # that would have passed this case.
    normalised: float
    p99: float
    bound: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.normalised)) and self.normalised <= self.bound


def compare(out: np.ndarray, ref: np.ndarray, bound: float) -> Comparison:
    """``out`` against ``ref`` (float64). Entries where ref is ±inf (an ALiBi mask) must match exactly."""
    if out.shape != ref.shape:
        return Comparison(float("inf"), float("inf"), float("inf"), bound)
    got = out.astype(np.float64)
    finite = np.isfinite(ref)
    with np.errstate(invalid="ignore"):
        diff = np.where(finite, np.abs(got - ref), np.where(got == ref, 0.0, np.inf))
    diff = np.where(np.isnan(diff), np.inf, diff)
    scale = max(1.0, float(np.max(np.abs(ref[finite]), initial=0.0)))
    worst = float(diff.max(initial=0.0))
    p99 = float(np.percentile(diff, 99)) / scale if diff.size else 0.0
    return Comparison(worst, worst / scale, p99, bound)


@dataclass(frozen=True)
class CaseResult:
    graph: str  # which built graph (encoding and dtype)
    case: str
    runtime: str  # a runtime, or "A vs B" for a pairwise comparison
    status: str  # pass | fail | error
    comparison: Comparison | None = None
    message: str = ""
    axes: Mapping[str, int] = field(default_factory=dict)
    largest_position: int | None = None


@dataclass(frozen=True)
class PropertyOutcome:
    graph: str
    property: str
    runtime: str
    status: str  # pass | fail | error | limitation (a failure the runtime declares as a known trap)
    detail: str
    error: float = 0.0


@dataclass
class Report:
    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)  # graph label -> manifest
    runtimes: dict[str, str] = field(default_factory=dict)  # runtime that ran -> description
    unavailable: dict[str, str] = field(default_factory=dict)  # runtime -> why it did not run
    notes: dict[str, str] = field(default_factory=dict)  # runtime -> what it computes differently in these graphs
    results: list[CaseResult] = field(default_factory=list)
    pairwise: list[CaseResult] = field(default_factory=list)
    properties: list[PropertyOutcome] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    # Runtime outputs, when the run kept them (--save-outputs); never part of the JSON report.
    outputs: Outputs | None = field(default=None, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        """Every case on every runtime within its bound, every pair agreeing, every property holding
        (or broken only where a runtime declares it a known limitation)."""
        return (
            bool(self.results)
            and all(r.status == "pass" for r in [*self.results, *self.pairwise])
            and all(p.status in ("pass", "limitation") for p in self.properties)
        )

    def strictly_passed(self) -> bool:
        """Passed, with every requested runtime available and no known limitation met."""
        return self.passed and not self.unavailable and all(p.status == "pass" for p in self.properties)

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "error": 0}
        for r in [*self.results, *self.pairwise]:
            out[r.status] += 1
        return out

    def failures(self) -> list[CaseResult]:
        return [r for r in [*self.results, *self.pairwise] if r.status != "pass"]

    def to_dict(self) -> dict[str, Any]:
        data = {f: getattr(self, f) for f in ("graphs", "runtimes", "unavailable", "notes", "settings")}
        data |= {f: [asdict(r) for r in getattr(self, f)] for f in ("results", "pairwise", "properties")}
        return finite_json(data | {"passed": self.passed})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        data = restore_json(data)

        def case(r: Mapping[str, Any]) -> CaseResult:
            c = r.get("comparison")
            return CaseResult(**{**r, "comparison": Comparison(**c) if c else None})

        return cls(
            graphs=dict(data["graphs"]),
            runtimes=dict(data["runtimes"]),
            unavailable=dict(data["unavailable"]),
            notes=dict(data["notes"]),
            results=[case(r) for r in data["results"]],
            pairwise=[case(r) for r in data["pairwise"]],
            properties=[PropertyOutcome(**p) for p in data["properties"]],
            settings=dict(data["settings"]),
        )


def finite_json(value: Any) -> Any:
    """JSON has no inf/nan: write them as the strings "inf", "-inf", "nan" (restore_json reverses it)."""
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


NON_FINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
FLOAT_FIELDS = {"max_abs", "normalised", "p99", "bound", "error"}


def restore_json(value: Any, key: str = "") -> Any:
    if isinstance(value, str) and key in FLOAT_FIELDS:
        return NON_FINITE[value]
    if isinstance(value, dict):
        return {k: restore_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_json(v) for v in value]
    return value


# --- tolerances -------------------------------------------------------------------------------------


Tolerance = float | Mapping[str, float] | None


def bound_for(artifact: Artifact, feeds: Mapping[str, np.ndarray], tolerance: Tolerance) -> float:
    """DESIGN 4.2's bound for this case, unless the run overrides it (for every dtype, or per dtype)."""
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
    from .dtypes import DTYPES

    if not text:
        return None
    try:
        if "=" not in text:
            value = float(text)
            assert value > 0
            return value
        out = {}
        for item in text.split(","):
            name, value = item.split("=")
            assert name.strip() in DTYPES and float(value) > 0
            out[name.strip()] = float(value)
        return out
    except (ValueError, AssertionError):
        raise PosexportError(
            f"--tolerance {text!r}: expected a positive number, or DTYPE=NUMBER pairs such as float16=5e-3,bfloat16=4e-2"
        ) from None


# --- saved outputs (compare a run on one machine with a run on another) ------------------------------


def feeds_digest(feeds: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(feeds):
        a = np.ascontiguousarray(feeds[name])
        h.update(f"{name}:{a.dtype.name}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@dataclass
class Outputs:
    """Runtime outputs of a run, keyed (graph, case, runtime), with the digest of each case's feeds."""

    arrays: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)
    graphs: dict[str, str] = field(default_factory=dict)  # graph label -> sha256 of the graph

    def save(self, path: str | Path) -> Path:
        """One .npz: outputs stored as float32/float64 (lossless for float16/bfloat16) plus a JSON index."""
        path = Path(path)
        index = {
            "digests": {f"{g}|{c}": d for (g, c), d in self.digests.items()},
            "graphs": self.graphs,
            "outputs": [[g, c, r] for g, c, r in self.arrays],
        }
        arrays = {f"out{i}": widen(a) for i, a in enumerate(self.arrays.values())}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, index=np.array(json.dumps(index)), **arrays)
        try:
            atomic_write(path, buffer.getvalue())
        except OSError as e:
            raise PosexportError(f"--save-outputs {path}: cannot write there ({e.strerror})") from None
        return path

    @classmethod
    def load(cls, path: str | Path) -> Outputs:
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                index = json.loads(str(data["index"]))
                arrays = {tuple(key): data[f"out{i}"] for i, key in enumerate(index["outputs"])}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
            raise PosexportError(f"--load-outputs {path}: not a file written by --save-outputs ({e})") from None
        digests = {tuple(k.split("|", 1)): d for k, d in index["digests"].items()}
        return cls(arrays, digests, dict(index["graphs"]))


def widen(array: np.ndarray) -> np.ndarray:
    """npz cannot hold bfloat16; float32 holds float16 and bfloat16 values exactly."""
    return array.astype(np.float32) if array.dtype.name in ("float16", "bfloat16") else array


SAVED = " (saved)"


# --- the engine -------------------------------------------------------------------------------------


Progress = Callable[[int, int, str], None]


def graph_label(artifact: Artifact) -> str:
    """encoding-dtype; a graph built --from-model is named by its role (gemma3's rope-local, rope-global)."""
    role = (artifact.manifest.get("model") or {}).get("role")
    return f"{role or artifact.encoding.name}-{artifact.options.dtype.name}"


def resolve_runtimes(runtimes: Sequence[str | Runtime] | None) -> list[Runtime]:
    """Runtime names (checked before anything runs) or Runtime objects; default: every registered one."""
    chosen = [get_runtime(r) if isinstance(r, str) else r for r in (runtimes or list(RUNTIMES))]
    names = [r.name for r in chosen]
    if len(set(names)) != len(names):
        raise PosexportError(f"--runtimes {','.join(names)}: a runtime is named twice")
    return chosen


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
    encoding's properties on each runtime. With ``keep_outputs`` the report carries the outputs."""
    graphs = [artifacts] if isinstance(artifacts, Artifact) else list(artifacts)
    chosen = resolve_runtimes(runtimes)
    report = Report(settings={"seed": seed, "seqs": list(seqs or ()), "batches": list(batches or ()),
                              "tolerance": tolerance, "pairwise": pairwise})
    outputs = Outputs()
    plans = []
    for art in graphs:
        label = graph_label(art)
        report.graphs[label] = art.manifest
        outputs.graphs[label] = art.manifest.get("sha256", "")
        if saved is not None and saved.graphs.get(label) not in (None, outputs.graphs[label]):
            raise PosexportError(f"--load-outputs: the saved outputs of {label} come from a different graph (sha256 differs)")
        sessions = load_sessions(art, chosen, report)
        cases = art.encoding.cases(art.params, seqs, batches)
        props = art.encoding.properties(art.params) if properties else []
        plans.append((art, label, sessions, cases, props))
    total = sum(len(cases) * max(1, len(sessions)) + len(props) * len(sessions) for _, _, sessions, cases, props in plans)
    done = 0

    def step(what: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, what)

    for art, label, sessions, cases, props in plans:
        enc, p = art.encoding, art.params
        for index, case in enumerate(cases):
            rng = np.random.default_rng([seed, index])
            feeds = enc.feeds(p, case, art.options.dtype, rng)
            digest = feeds_digest(feeds)
            outputs.digests[(label, case.label)] = digest
            ref = np.asarray(enc.reference(p, feeds), dtype=np.float64)
            bound = bound_for(art, feeds, tolerance)
            largest = enc.largest_position(p, feeds)
            here: dict[str, np.ndarray] = {}
            bounds: dict[str, float] = {}
            info = dict(axes=dict(case.axes), largest_position=largest)
            for name, (runtime, session) in sessions.items():
                bounds[name] = runtime_bound(runtime, art, feeds, bound)
                result, out = judge(session.run, feeds, ref, bounds[name])
                report.results.append(CaseResult(label, case.label, name, **result, **info))
                if out is not None:
                    here[name] = out
                step(f"{label} {case.label} on {name}")
            if not sessions:
                step(f"{label} {case.label}")
            for name, out in saved_outputs(saved, label, case.label, digest):
                result, _ = judge(lambda _: out, feeds, ref, bound)
                report.results.append(CaseResult(label, case.label, name, **result, **info))
                here[name] = out
            if pairwise:
                for a, b in itertools.combinations(sorted(here), 2):
                    pair_bound = PAIRWISE_FACTOR * max(bounds.get(a, bound), bounds.get(b, bound))
                    cmp = compare(here[a], here[b].astype(np.float64), pair_bound)
                    report.pairwise.append(CaseResult(label, case.label, f"{a} vs {b}", "pass" if cmp.passed else "fail", cmp, **info))
            if keep_outputs:
                for name, out in here.items():
                    if not name.endswith(SAVED):
                        outputs.arrays[(label, case.label, name)] = out
        for k, prop in enumerate(props):
            for name, (runtime, session) in sessions.items():
                rng = np.random.default_rng([seed, PROPERTY_STREAM, k])
                report.properties.append(check_property(label, prop, name, runtime, session, art, rng))
                step(f"{label} {prop.name} on {name}")
    if saved is not None and not any(r.runtime.endswith(SAVED) for r in report.results):
        raise PosexportError("--load-outputs: no saved output matches this run's graphs and cases; use the same graph, "
                             "--seqs and --batches as the saving run")
    if keep_outputs:
        report.outputs = outputs
    return report


def runtime_bound(runtime: Runtime, art: Artifact, feeds: Mapping[str, np.ndarray], bound: float) -> float:
    """A runtime that is not a graph runtime (hf: the model's own code) may judge with its own bound."""
    own = getattr(runtime, "bound", None)
    return own(art, feeds, bound) if own else bound


def load_sessions(art: Artifact, chosen: list[Runtime], report: Report) -> dict[str, tuple[Runtime, Any]]:
    """A session per runtime that can run this graph; the others are recorded with their reason."""
    sessions = {}
    for rt in chosen:
        ok, why = rt.available()
        if ok:
            ok, why = rt.supports(art)
        if ok:
            try:
                sessions[rt.name] = (rt, rt.load(art))
            except Exception as e:  # a runtime that cannot load the graph says so; the run goes on
                ok, why = False, f"failed to load the graph: {one_line(e)}"
        if ok:
            report.runtimes[rt.name] = rt.description
            caveat = rt.caveats(art)
            if caveat:
                report.notes[rt.name] = caveat
        else:
            previous = report.unavailable.get(rt.name)
            report.unavailable[rt.name] = why if previous in (None, why) else f"{previous}; {why}"
    return sessions


def saved_outputs(saved: Outputs | None, label: str, case: str, digest: str):
    if saved is None:
        return
    for (g, c, runtime), out in saved.arrays.items():
        if (g, c) != (label, case):
            continue
        if saved.digests.get((g, c)) != digest:
            raise PosexportError(
                f"--load-outputs: {runtime}'s saved output for {label} {case} was made from other inputs; "
                "use the same graph, --seed, --seqs and --batches as the saving run"
            )
        yield runtime + SAVED, out


def judge(run: Callable[[Mapping[str, np.ndarray]], np.ndarray], feeds: Mapping[str, np.ndarray], ref: np.ndarray, bound: float) -> tuple[dict[str, Any], np.ndarray | None]:
    try:
        out = np.asarray(run(feeds))
    except Exception as e:
        return dict(status="error", message=one_line(e)), None
    cmp = compare(out, ref, bound)
    message = "" if cmp.passed else f"error {cmp.normalised:.2e} > bound {cmp.bound:.1e} (max abs {cmp.max_abs:.2e})"
    if out.shape != ref.shape:
        message = f"output shape {out.shape} != expected {ref.shape}"
    return dict(status="pass" if cmp.passed else "fail", comparison=cmp, message=message), out


def check_property(label: str, prop: Any, name: str, runtime: Runtime, session: Any, art: Artifact, rng: np.random.Generator) -> PropertyOutcome:
    try:
        result = prop.check(session.run, art.params, art.options.dtype, rng)
    except Exception as e:
        return PropertyOutcome(label, prop.name, name, "error", one_line(e), float("inf"))
    if result.ok:
        return PropertyOutcome(label, prop.name, name, "pass", result.detail, result.error)
    known = getattr(runtime, "limitations", {}).get(prop.name)
    if known:
        return PropertyOutcome(label, prop.name, name, "limitation", f"{result.detail} — known limitation: {known}", result.error)
    return PropertyOutcome(label, prop.name, name, "fail", result.detail, result.error)


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


def parse_ints(text: str | None, option: str) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise PosexportError(f"{option} {text!r}: expected comma-separated positive integers, e.g. 1,17,512") from None
    if any(v < 1 for v in values):
        raise PosexportError(f"{option} {text!r}: every value must be ≥ 1")
    return values
