"""What a bench run is made of: its settings, its rows, and the one way a subject is timed (a session of
a registered runtime, loaded with the run's threads, its inputs bound once, called repeatedly)."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract import DEFAULT_TARGET, SCHEMA_VERSION, Artifact
from ..errors import PosexportError, one_line
from ..runtimes import Bound, Runtime, SessionOptions

if TYPE_CHECKING:
    from ..encodings.base import Encoding


@dataclass
class Row:
    encoding: str
    runtime: str
    dtype: str
    seq: int
    subject: str  # a baseline name or a backend name
    kind: str  # baseline | backend | indexshare
    shape: list[int]
    median_ms: float
    iqr_ms: float
    min_ms: float
    ratio_to_copy: float = float("nan")
    graph_bytes: int | None = None
    note: str = ""
    profile: list[tuple[str, float]] = field(default_factory=list)
    layout: str = ""  # rope: the axis layout of x (bsh, bshd, bhsd)
    position: int = 0  # the first position of the call (decode rows: the position of the one token)


@dataclass
class BenchConfig:
    encodings: tuple[str, ...] = ("rope",)
    params: dict[str, Any] = field(default_factory=dict)
    backends: tuple[str, ...] = ("auto", "portable", "onnx23", "ort")
    runtimes: tuple[str, ...] = ("ort-cpu",)
    browser: str = ""  # the Chromium that browser runtimes drive ('' : chromium on PATH)
    dtypes: tuple[str, ...] = ("float32",)
    seqs: tuple[int, ...] = (2048,)
    batch: int = 1
    threads: int = 1
    warmup: int = 5
    repeats: int = 30
    indexshare_layers: int = 0
    indexshare_seqs: tuple[int, ...] = ()  # default: seqs
    profile: bool = False
    target: str = DEFAULT_TARGET
    layouts: tuple[str, ...] = ()  # rope: one set of groups per layout (default: the --layout option's)
    decode_positions: tuple[int, ...] = ()  # rope: also one token (seq 1) at each of these positions


@dataclass
class BenchResult:
    meta: dict[str, Any]
    rows: list[Row]
    targets: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """What `posexport bench --json` writes (docs/schemas/bench.json): strict JSON, a number not measured
        (a ratio without its copy, a load average the system does not give) is null."""
        return finite_or_null({"schema_version": SCHEMA_VERSION, "meta": self.meta, "rows": [asdict(r) for r in self.rows],
                               "targets": self.targets})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, at any depth (JSON has neither)."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


def time_interleaved(calls: Sequence[Callable[[], Any]], warmup: int, repeats: int) -> list[tuple[float, float, float]]:
    """(median, IQR, min) in milliseconds of each call: `warmup` untimed runs of each, then `repeats`
    rounds that time every call once (round-robin), in a fresh random order each round (seeded), so
    that a slow spell of the machine, or what the call before left in the caches, hits every subject
    alike and their ratios hold."""
    for call in calls:
        for _ in range(warmup):
            call()
    times = np.empty((len(calls), repeats))
    order = np.random.default_rng(0)
    for i in range(repeats):
        for j in order.permutation(len(calls)):
            start = time.perf_counter_ns()
            calls[j]()
            times[j, i] = (time.perf_counter_ns() - start) / 1e6
    out = []
    for row in times:
        q25, q50, q75 = np.percentile(row, [25, 50, 75])
        out.append((float(q50), float(q75 - q25), float(row.min())))
    return out


def time_calls(call: Callable[[], Any], warmup: int, repeats: int) -> tuple[float, float, float]:
    """(median, IQR, min) in milliseconds of `repeats` calls after `warmup` untimed ones."""
    return time_interleaved([call], warmup, repeats)[0]


def params_for(enc: Encoding, values: Mapping[str, Any]) -> Any:
    """The encoding's parameters from the shared options: each encoding takes the ones it knows."""
    known = {f.name for f in dataclasses.fields(enc.Params)}
    return enc.params(**{k: v for k, v in values.items() if k in known})


@dataclass
class Pending:
    """A subject loaded and bound, waiting for the group's interleaved timing."""

    row: Row
    call: Bound
    check: Callable[[Bound], None] | None
    profiled: Callable[[float], list[tuple[str, float]]] | None  # median ms -> a separate profiling session's op shares


@dataclass
class Group:
    """The rows timed on one runtime for one (encoding, dtype, shape, position), on the same feeds. Subjects
    are loaded and bound as they are added, then ``run`` times them all round-robin."""

    cfg: BenchConfig
    encoding: str
    runtime: Runtime
    dtype: str
    seq: int
    shape: list[int]
    feeds: Mapping[str, np.ndarray]
    rows: list[Row] = field(default_factory=list)
    layout: str = ""
    position: int = 0
    pending: list[Pending] = field(default_factory=list)

    def add(self, subject: str, kind: str, timing: tuple[float, float, float] | None = None, *, graph_bytes: int | None = None,
            note: str = "", profile: list[tuple[str, float]] | None = None) -> Row:
        nan = (float("nan"),) * 3
        row = Row(self.encoding, self.runtime.name, self.dtype, self.seq, subject, kind, list(self.shape), *(timing or nan),
                  graph_bytes=graph_bytes if timing else None, note=note, profile=profile or [], layout=self.layout,
                  position=self.position)
        self.rows.append(row)
        return row

    def timed(self, subject: str, kind: str, artifact: Artifact, *, feeds: Mapping[str, np.ndarray] | None = None,
              runtime: Runtime | None = None, profile: bool = True, graph_bytes: int | None = None, note: str = "",
              check: Callable[[Bound], None] | None = None) -> Row:
        """Load the artifact on the group's runtime (or ``runtime``) and bind the group's feeds (or
        ``feeds``); ``run`` times it. A runtime that cannot run it gives a row without times that says
        why (reported, not fatal). ``check`` inspects the bound run's outputs after timing."""
        rt = runtime or self.runtime
        ok, why = rt.supports(artifact)
        if not ok:
            return self.add(subject, kind, note=f"{rt.name} cannot run it: {why}")
        feeds = self.feeds if feeds is None else feeds
        try:
            call = rt.load(artifact, SessionOptions(self.cfg.threads, spinning=False)).bind(feeds)
            call()
        except PosexportError:
            raise
        except Exception as e:  # a runtime without a kernel for this op: reported, not fatal
            return self.add(subject, kind, note=f"could not run: {one_line(e, 200)}")
        row = self.add(subject, kind, graph_bytes=graph_bytes, note=note)
        row.graph_bytes = graph_bytes
        profiled = functools.partial(self.profile_of, rt, artifact, feeds) if self.cfg.profile and profile else None
        self.pending.append(Pending(row, call, check, profiled))
        return row

    def profile_of(self, rt: Runtime, artifact: Artifact, feeds: Mapping[str, np.ndarray], median_ms: float) -> list[tuple[str, float]]:
        """Op-type shares from a session of its own: a profiler's per-node cost never enters the times. A
        graph of well under a millisecond is profiled over many runs, so that a first call's one-off costs
        (the profile counts every run) do not stand for the graph."""
        session = rt.load(artifact, SessionOptions(self.cfg.threads, profile=True, spinning=False))
        call = session.bind(feeds)
        runs = self.cfg.warmup + max(3, self.cfg.repeats // 3)
        for _ in range(max(runs, 200) if median_ms < 0.1 else runs):
            call()
        return session.profile()

    def run(self) -> list[Row]:
        """Time every bound subject round-robin, then fill in times and profiles."""
        timings = time_interleaved([p.call for p in self.pending], self.cfg.warmup, self.cfg.repeats)
        for p, (median, iqr, least) in zip(self.pending, timings):
            p.row.median_ms, p.row.iqr_ms, p.row.min_ms = median, iqr, least
            p.row.profile = p.profiled(median) if p.profiled else []
            if p.check:
                p.check(p.call)
        self.pending.clear()
        return self.rows

    def set_ratios(self) -> list[Row]:
        """Every row's median over the copy's (the group's first row)."""
        copy_ms = self.rows[0].median_ms
        for r in self.rows:
            r.ratio_to_copy = r.median_ms / copy_ms
        return self.rows
