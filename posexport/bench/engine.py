"""The run: every (encoding, runtime, dtype, sequence length) group times its baselines, then each
backend built for the same parameters (`auto` reported under its resolved name), then, if asked, the
IndexShare block. Every subject is timed through the runtime registry (posexport.runtimes): a session
loaded with the run's thread count, its inputs and outputs bound once (Session.bind), warm-up runs, then
repeats timed one by one; median, interquartile range, minimum, and the median's ratio to the copy's."""

from __future__ import annotations

import dataclasses
import os
import platform
import shlex
import sys
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import export
from ..contract import AUTO, DEFAULT_OPSET, ONNX23, PORTABLE, Artifact, Case
from ..dtypes import get_dtype
from ..encodings.base import Encoding
from ..errors import PosexportError, UnknownOption
from ..params import check, convert, field_type, parse_options
from ..registry import get_encoding
from ..rope import backends as rope_backends
from ..runtimes import Runtime
from ..verdicts.runners import get_runtimes
from .baselines import BASELINES, bench_indexshare, bias_only_row, contrib_row, copy_row, eager_row, naive_row
from .targets import check_targets
from .timing import BenchConfig, BenchResult, Group, Row, params_for

Progress = Callable[[str, int, int], None]


class Ticker:
    """Counts finished steps for a progress callback (label, done, total)."""

    def __init__(self, progress: Progress | None, total: int):
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, label: str) -> None:
        self.done += 1
        if self.progress:
            self.progress(label, self.done, self.total)


class Artifacts:
    """Each (encoding, parameters, dtype, backend) built once per run."""

    def __init__(self) -> None:
        self.built: dict[tuple, Artifact] = {}

    def get(self, enc: Encoding, p: Any, dtype: str, backend: str, opset: int = DEFAULT_OPSET) -> Artifact:
        key = (enc.name, p, dtype, backend, opset)
        if key not in self.built:
            self.built[key] = export.build(enc, p, dtype=dtype, backend=backend, opset=opset)
        return self.built[key]


def available_runtimes(names: Sequence[str], browser: str = "") -> tuple[list[Runtime], dict[str, str]]:
    """The named runtimes that can run here, and why each other one cannot (an unknown name is an error);
    those that run in a browser run in ``browser`` when given."""
    chosen, skipped = [], {}
    for rt in get_runtimes(names, browser or None):
        ok, why = rt.available()
        if ok:
            chosen.append(rt)
        else:
            skipped[rt.name] = why
    return chosen, skipped


@dataclass(frozen=True)
class Shape:
    """What one group times: a layout (rope; '' = the parameters' own) and a call of ``seq`` tokens
    starting at ``position`` (a decode step: seq 1 at a large position)."""

    seq: int
    layout: str = ""
    position: int = 0


def group_shapes(cfg: BenchConfig, enc: Encoding) -> list[Shape]:
    """Prefill lengths and decode steps (rope: one token at each decode position, for each layout asked
    for; attention biases: one query against that many keys); other encodings have neither."""
    if enc.family == "attention-bias":
        return [Shape(seq) for seq in cfg.seqs] + [Shape(1, "", keys) for keys in cfg.decode_positions]
    if enc.family != "rope":
        return [Shape(seq) for seq in cfg.seqs]
    layouts = cfg.layouts or ("",)
    calls = [(seq, 0) for seq in cfg.seqs] + [(1, position) for position in cfg.decode_positions]
    return [Shape(seq, layout, position) for layout in layouts for seq, position in calls]


def run_bench(cfg: BenchConfig, progress: Progress | None = None) -> BenchResult:
    """Every (encoding, runtime, dtype, shape) group: baselines, then each backend, then IndexShare."""
    runtimes, skipped = available_runtimes(cfg.runtimes, cfg.browser)
    groups = [(e, r, d, s) for e in cfg.encodings for r in runtimes for d in cfg.dtypes for s in group_shapes(cfg, get_encoding(e))]
    block_seqs = tuple(cfg.indexshare_seqs) or tuple(cfg.seqs)
    block_dtypes = [d for d in cfg.dtypes if d != "bfloat16"]
    steps = len(groups) * (len(BASELINES) + len(cfg.backends) + 1)
    steps += 2 * len(block_seqs) * len(runtimes) * len(block_dtypes) if cfg.indexshare_layers else 0
    tick, artifacts = Ticker(progress, steps), Artifacts()
    rows: list[Row] = []
    for enc_name, runtime, dtype, shape in groups:
        rows += bench_group(cfg, get_encoding(enc_name), runtime, dtype, shape, artifacts, tick)
    if cfg.indexshare_layers:
        for runtime in runtimes:
            for seq in block_seqs:
                rows += bench_indexshare(cfg, runtime, seq, tick)
    meta = machine_meta(cfg)
    meta["runtimes"] = {rt.name: rt.description for rt in runtimes}
    meta["skipped_runtimes"] = skipped
    return BenchResult(meta, rows, check_targets(rows))


def bench_group(cfg: BenchConfig, enc: Encoding, runtime: Runtime, dtype: str, shape: Shape, artifacts: Artifacts,
                tick: Callable[[str], None]) -> list[Row]:
    """One group's rows, the copy first (every ratio is to it), timed together round-robin."""
    p = params_for(enc, cfg.params | ({"layout": shape.layout} if shape.layout else {}))
    seq = shape.seq
    case = group_case(cfg, enc, p, shape)
    feeds = enc.feeds(p, case, get_dtype(dtype), np.random.default_rng(0))
    first = enc.inputs(p)[0].name
    group = Group(cfg, enc.name, runtime, dtype, seq, list(feeds[first].shape), {s.name: feeds[s.name] for s in enc.inputs(p)},
                  layout=getattr(p, "layout", "") if enc.family == "rope" else "", position=shape.position)
    where = f"{enc.name} {group.layout} {runtime.name} {dtype} seq {seq}" + (f" @{shape.position}" if shape.position else "")
    copy_row(group, first)
    tick(f"{where}: copy")
    if enc.family == "rope":
        naive_row(group, p)
        contrib_row(group, p)
    if enc.family == "attention-bias":
        bias_only_row(group, artifacts.get(enc, dataclasses.replace(p, output="bias"), dtype, PORTABLE), case)
    tick(f"{where}: naive export, contrib op, bias only")
    eager_row(group, artifacts.get(enc, p, dtype, PORTABLE))
    tick(f"{where}: torch eager")
    for name in cfg.backends:
        label = backend_row(group, enc, p, name, artifacts)
        tick(f"{where}: {label}")
    group.run()
    tick(f"{where}: timed")
    return group.set_ratios()


def group_case(cfg: BenchConfig, enc: Encoding, p: Any, shape: Shape) -> Case:
    """Every named axis but batch takes the sequence length (q_len = k_len = seq for attention biases); a
    rope decode step starts at its position, an attention-bias one has that many keys."""
    names = {d for spec in enc.inputs(p) for d in spec.dims if isinstance(d, str)}
    axes = {n: (cfg.batch if n == "batch" else shape.seq) for n in names}
    if enc.family == "attention-bias" and shape.position:
        return Case(f"q1-k{shape.position}", axes | {"k_len": shape.position})
    return Case(f"seq{shape.seq}", axes, start=shape.position)


def backend_row(group: Group, enc: Encoding, p: Any, name: str, artifacts: Artifacts) -> str:
    """Time one backend (rope only has several; other encodings have auto and portable); its label."""
    if enc.family != "rope" and name not in (AUTO, PORTABLE):
        return f"{name} (rope only)"
    if not group.runtime.runs_graphs:
        return f"{name} ({group.runtime.name} runs the module: see torch-eager)"
    target = group.cfg.target
    try:
        resolved = rope_backends.resolve_backend(name, enc.family, backend_opset(name, target), target)
    except PosexportError as e:
        group.add(name, "backend", note=str(e))
        return name
    label = f"auto ({resolved})" if name == AUTO else name
    art = artifacts.get(enc, p, group.dtype, resolved, backend_opset(resolved, target))
    group.timed(label, "backend", art, graph_bytes=art.manifest["bytes"])
    return label


def backend_opset(name: str, target: str) -> int:
    """Each backend at the oldest opset it needs: opset 23 for onnx23 (and for auto with a standard
    target, so that it may choose RotaryEmbedding-23), the default otherwise."""
    if name == ONNX23 or (name == AUTO and target == "standard"):
        return max(DEFAULT_OPSET, rope_backends.BACKENDS[ONNX23].min_opset)
    return DEFAULT_OPSET


def check_params(encodings: Sequence[str], values: dict[str, Any]) -> None:
    """An option that none of the chosen encodings takes is a mistake, not something to drop silently."""
    known = {f.name for e in encodings for f in dataclasses.fields(get_encoding(e).Params)}
    for name in values:
        if name not in known:
            raise UnknownOption(name, ["--" + k.replace("_", "-") for k in sorted(known)],
                                problem=f"none of the encodings {', '.join(encodings)} takes this option")


def machine() -> dict[str, Any]:
    """The command, the machine and its load, the versions and the time: what every bench record carries."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "command": "posexport " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if Path(sys.argv[0]).name == "posexport" else None,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "versions": export.versions(),
        "time_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


def machine_meta(cfg: BenchConfig) -> dict[str, Any]:
    return machine() | {"encodings": list(cfg.encodings), "threads": cfg.threads, "warmup": cfg.warmup, "repeats": cfg.repeats,
                        "params": dict(cfg.params), "batch": cfg.batch}


def config_from_options(args: Sequence[str] = (), params: Mapping[str, Any] | None = None, **options: Any) -> BenchConfig:
    """A BenchConfig from command-line values: encoding parameters as free options in ``args``
    (--head-dim 64 …) or as ``params``, every BenchConfig field by name, lists as comma-separated text ('' =
    default) or sequences."""
    values: dict[str, Any] = {}
    for name, raw in options.items():
        if isinstance(raw, str) and typing.get_origin(field_type(BenchConfig, name)) is tuple:
            raw = ",".join(item.strip() for item in raw.split(",") if item.strip())
            if not raw:
                continue
        values[name] = convert(BenchConfig, name, raw)
    for name in ("seqs", "indexshare_seqs"):
        check(all(v >= 1 for v in values.get(name, ())), name, options.get(name), "every value must be ≥ 1")
    check(all(v >= 0 for v in values.get("decode_positions", ())), "decode_positions", options.get("decode_positions"),
          "every position must be ≥ 0")
    params = {**parse_options(list(args)), **(params or {})}
    check_params(values.get("encodings", BenchConfig.encodings), params)
    return BenchConfig(params=params, **values)


def run_from_options(args: Sequence[str] = (), progress: Progress | None = None, **options: Any) -> BenchResult:
    """`posexport bench` as a library call: config_from_options, then run_bench."""
    return run_bench(config_from_options(args, **options), progress)
