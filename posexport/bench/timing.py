"""What a bench run is made of: its settings, its rows, and the one way a subject is timed (a session of
a registered runtime, loaded with the run's threads, its inputs bound once, called repeatedly)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..contract import DEFAULT_TARGET, Artifact
from ..errors import PosexportError
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


@dataclass
class BenchConfig:
    encodings: tuple[str, ...] = ("rope",)
    params: dict[str, Any] = field(default_factory=dict)
    backends: tuple[str, ...] = ("auto", "portable", "onnx23", "ort")
    runtimes: tuple[str, ...] = ("ort-cpu",)
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


@dataclass
class BenchResult:
    meta: dict[str, Any]
    rows: list[Row]
    targets: list[dict[str, Any]]

    def to_json(self) -> str:
        return json.dumps({"meta": self.meta, "rows": [asdict(r) for r in self.rows], "targets": self.targets}, indent=2) + "\n"


def time_calls(call: Callable[[], Any], warmup: int, repeats: int) -> tuple[float, float, float]:
    """(median, IQR, min) in milliseconds of `repeats` calls after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    times = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter_ns()
        call()
        times[i] = (time.perf_counter_ns() - start) / 1e6
    q25, q50, q75 = np.percentile(times, [25, 50, 75])
    return float(q50), float(q75 - q25), float(times.min())


def params_for(enc: Encoding, values: Mapping[str, Any]) -> Any:
    """The encoding's parameters from the shared options: each encoding takes the ones it knows."""
    known = {f.name for f in dataclasses.fields(enc.Params)}
    return enc.params(**{k: v for k, v in values.items() if k in known})


def one_line(error: BaseException, limit: int = 200) -> str:
    return " ".join(str(error).split())[:limit]


@dataclass
class Group:
    """The rows timed on one runtime for one (encoding, dtype, sequence length), on the same feeds."""

    cfg: BenchConfig
    encoding: str
    runtime: Runtime
    dtype: str
    seq: int
    shape: list[int]
    feeds: Mapping[str, np.ndarray]
    rows: list[Row] = field(default_factory=list)

    def add(self, subject: str, kind: str, timing: tuple[float, float, float] | None = None, *, graph_bytes: int | None = None,
            note: str = "", profile: list[tuple[str, float]] | None = None) -> Row:
        nan = (float("nan"),) * 3
        row = Row(self.encoding, self.runtime.name, self.dtype, self.seq, subject, kind, list(self.shape), *(timing or nan),
                  graph_bytes=graph_bytes if timing else None, note=note, profile=profile or [])
        self.rows.append(row)
        return row

    def timed(self, subject: str, kind: str, artifact: Artifact, *, feeds: Mapping[str, np.ndarray] | None = None,
              runtime: Runtime | None = None, profile: bool = True, graph_bytes: int | None = None, note: str = "",
              check: Callable[[Bound], None] | None = None) -> Row:
        """Time the artifact on the group's feeds (or ``feeds``) and runtime (or ``runtime``); a runtime
        that cannot run it gives a row without times that says why (reported, not fatal). ``check``
        inspects the bound run's outputs after timing."""
        rt = runtime or self.runtime
        ok, why = rt.supports(artifact)
        if not ok:
            return self.add(subject, kind, note=f"{rt.name} cannot run it: {why}")
        try:
            session = rt.load(artifact, SessionOptions(self.cfg.threads, self.cfg.profile and profile))
            call = session.bind(self.feeds if feeds is None else feeds)
            timing = time_calls(call, self.cfg.warmup, self.cfg.repeats)
            if check:
                check(call)
        except PosexportError:
            raise
        except Exception as e:  # a runtime without a kernel for this op: reported, not fatal
            return self.add(subject, kind, note=f"could not run: {one_line(e)}")
        return self.add(subject, kind, timing, graph_bytes=graph_bytes, note=note, profile=session.profile())

    def set_ratios(self) -> list[Row]:
        """Every row's median over the copy's (the group's first row)."""
        copy_ms = self.rows[0].median_ms
        for r in self.rows:
            r.ratio_to_copy = r.median_ms / copy_ms
        return self.rows
