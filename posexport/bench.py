"""`posexport bench`: time built graphs against the memory-bound limit (DESIGN 7), in one process.

Every group of rows (one encoding, execution provider, dtype, sequence length) carries its baselines:

    copy          a graph whose output is a copy of its first input, run with the output bound to a
                  preallocated buffer (IOBinding): onnxruntime must write every byte of it, so this is the
                  cost of reading the tensor once and writing it once — the floor for any op that has to
                  produce it. (A graph `Identity` would otherwise hand back the input's own buffer, and
                  `x + 0` or `x * 1` are removed by onnxruntime's no-op elimination, so a plain session.run of
                  either measures an allocation, not a write. The binding is checked to really hold x.)
    naive-export  rope only: the seed tutorial's RotaryPositionEmbedding (cos/sin cached for max_len, sliced
                  to seq_len, rotate_half with cat and neg) exported with torch.onnx as it stands
    torch-eager   the encoding's own torch module, eager

and one row per backend (posexport.backends) built for the same parameters; `auto` is reported under its
resolved name. Each row: warm-up runs, then repeats timed one by one; median, interquartile range, minimum,
and the median's ratio to the copy's. Threads are fixed for onnxruntime (intra-op) and torch alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import torch

from . import export
from .files import atomic_write
from .rope import backends as rope_backends, indexshare
from .dtypes import DType, get_dtype
from .contract import Case
from .encodings.base import Encoding
from .errors import PosexportError
from .registry import get_encoding

BASELINES = ("copy", "naive-export", "torch-eager")  # naive-export: rope only
PROVIDERS = {"ort-cpu": "CPUExecutionProvider", "ort-cuda": "CUDAExecutionProvider"}


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
    encodings: Sequence[str] = ("rope",)
    params: dict[str, Any] = field(default_factory=dict)
    backends: Sequence[str] = ("auto", "portable", "onnx23", "ort")
    runtimes: Sequence[str] = ("ort-cpu",)
    dtypes: Sequence[str] = ("float32",)
    seqs: Sequence[int] = (2048,)
    batch: int = 1
    threads: int = 1
    warmup: int = 5
    repeats: int = 30
    indexshare_layers: int = 0
    indexshare_seqs: Sequence[int] = ()  # default: seqs
    profile: bool = False
    target: str = rope_backends.DEFAULT_TARGET


@dataclass
class BenchResult:
    meta: dict[str, Any]
    rows: list[Row]
    targets: list[dict[str, Any]]

    def to_json(self) -> str:
        return json.dumps({"meta": self.meta, "rows": [asdict(r) for r in self.rows], "targets": self.targets}, indent=2) + "\n"


# --- timing -----------------------------------------------------------------------------------------


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


class BoundSession:
    """An onnxruntime session with inputs and outputs bound once (IOBinding), on the EP's device."""

    def __init__(self, model_bytes: bytes, runtime: str, threads: int, feeds: dict[str, np.ndarray],
                 outputs: dict[str, tuple[tuple[int, ...], np.dtype, int]], profile: bool = False):
        import onnxruntime as ort

        ort.set_default_logger_severity(4)
        self.ort = ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        if profile:
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(tempfile.gettempdir(), "posexport_bench")
        provider = PROVIDERS[runtime]
        self.session = ort.InferenceSession(model_bytes, options, providers=[provider])
        if self.session.get_providers()[0] != provider:
            raise PosexportError(f"{runtime}: onnxruntime fell back to {self.session.get_providers()[0]}")
        self.device = "cuda" if runtime == "ort-cuda" else "cpu"
        self.binding = self.session.io_binding()
        self.outputs: dict[str, Any] = {}
        for name, array in feeds.items():
            self.binding.bind_ortvalue_input(name, self.value(array))
        for name, (shape, dtype, onnx_type) in outputs.items():
            value = self.value(np.empty(shape, dtype=dtype))
            self.outputs[name] = value
            self.binding.bind_ortvalue_output(name, value)

    def value(self, array: np.ndarray) -> Any:
        if array.dtype.name == "bfloat16":
            return self.ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), onnx.TensorProto.BFLOAT16)
        return self.ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, 0)

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def output(self, name: str) -> np.ndarray:
        return self.outputs[name].numpy()

    def profile(self, runs: int = 5) -> list[tuple[str, float]]:
        """Share of node time by op type over a few runs (onnxruntime's profiler), largest first."""
        for _ in range(runs):
            self()
        path = self.session.end_profiling()
        try:
            events = json.loads(Path(path).read_text())
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        by_op: dict[str, float] = {}
        for e in events:
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                op = e.get("args", {}).get("op_name", "?")
                by_op[op] = by_op.get(op, 0.0) + float(e.get("dur", 0))
        total = sum(by_op.values()) or 1.0
        return sorted(((op, t / total) for op, t in by_op.items()), key=lambda kv: -kv[1])[:5]


def runtime_available(runtime: str) -> tuple[bool, str]:
    if runtime not in PROVIDERS:
        raise PosexportError(f"--runtimes {runtime!r}: bench runs onnxruntime; choose from {', '.join(PROVIDERS)}")
    import onnxruntime as ort

    if PROVIDERS[runtime] not in ort.get_available_providers():
        return False, f"this onnxruntime has no {PROVIDERS[runtime]} (pip install onnxruntime-gpu for ort-cuda)"
    return True, ""


# --- the subjects -------------------------------------------------------------------------------------


def copy_model(elem_type: int, rank: int) -> onnx.ModelProto:
    """y = Identity(x): with y bound to its own buffer, running it writes a full copy of x."""
    dims = [f"d{i}" for i in range(rank)]
    graph = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "copy",
                          [oh.make_tensor_value_info("x", elem_type, dims)], [oh.make_tensor_value_info("y", elem_type, dims)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", export.DEFAULT_OPSET)], ir_version=10)


class TutorialRotaryEmbedding(torch.nn.Module):
    """The seed tutorial's RoPE, as users write it: cos/sin cached for max_len, sliced to the sequence,
    rotate_half by cat and neg; positions are 0 … seq−1 (no position_ids). x: [batch, seq, heads, dim]."""

    def __init__(self, dim: int, max_len: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        freqs = torch.outer(torch.arange(max_len).float(), inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.register_buffer("cos_cached", emb.cos()[None, :, None, :])
        self.register_buffer("sin_cached", emb.sin()[None, :, None, :])

    @staticmethod
    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[1]
        cos, sin = self.cos_cached[:, :seq_len], self.sin_cached[:, :seq_len]
        return x * cos + self.rotate_half(x) * sin


@functools.lru_cache(maxsize=8)
def naive_export(heads: int, dim: int, max_len: int, base: float, dtype: DType) -> onnx.ModelProto:
    """torch.onnx.export of the tutorial module with a dynamic sequence axis, nothing else changed."""
    module = TutorialRotaryEmbedding(dim, max_len, base).to(dtype.torch).eval()
    example = torch.ones(1, 7, heads, dim, dtype=dtype.torch)
    with export.quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(module, (example,), dynamo=True, input_names=["x"], output_names=["y"],
                                    dynamic_shapes={"x": {1: torch.export.Dim("seq", min=1, max=max_len)}})
    return program.model_proto


def axes_for(enc: Encoding, p: Any, seq: int, batch: int) -> dict[str, int]:
    """Every named axis but batch takes the sequence length (q_len = k_len = seq for attention biases)."""
    names = {d for spec in enc.inputs(p) for d in spec.dims if isinstance(d, str)}
    return {n: (batch if n == "batch" else seq) for n in names}


def output_specs(enc: Encoding, p: Any, feeds: dict[str, np.ndarray], dtype: DType) -> dict[str, tuple]:
    sizes: dict[str, int] = {}
    for spec in enc.inputs(p):
        for dim, size in zip(spec.dims, feeds[spec.name].shape):
            if isinstance(dim, str):
                sizes[dim] = size
    return {o.name: (tuple(sizes[d] if isinstance(d, str) else d for d in o.dims), dtype.numpy, dtype.onnx) for o in enc.outputs(p)}


def torch_tensor(array: np.ndarray) -> torch.Tensor:
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.uint16).astype(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


# --- the run ------------------------------------------------------------------------------------------


def plan(cfg: BenchConfig) -> list[tuple[str, str, str, int]]:
    return [(e, r, d, s) for e in cfg.encodings for r in cfg.runtimes for d in cfg.dtypes for s in cfg.seqs]


def run_bench(cfg: BenchConfig, progress: Callable[[str, int, int], None] | None = None) -> BenchResult:
    """Every (encoding, runtime, dtype, seq) group: baselines, then each backend, then IndexShare."""
    torch.set_num_threads(cfg.threads)
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    groups = plan(cfg)
    block_dtypes = [d for d in cfg.dtypes if d != "bfloat16"]
    steps = len(groups) * (len(BASELINES) + len(cfg.backends))
    block_seqs = tuple(cfg.indexshare_seqs) or tuple(cfg.seqs)
    steps += 4 * len(block_seqs) * len(cfg.runtimes) * len(block_dtypes) if cfg.indexshare_layers else 0
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        done += 1
        if progress:
            progress(label, done, steps)

    artifacts: dict[tuple[str, str, str], export.Artifact] = {}
    for enc_name, runtime, dtype_name, seq in groups:
        ok, why = runtime_available(runtime)
        if not ok:
            skipped[runtime] = why
            done += len(BASELINES) + len(cfg.backends)
            continue
        enc = get_encoding(enc_name)
        p = params_for(enc, cfg.params)
        dtype = get_dtype(dtype_name)
        case = Case(f"seq{seq}", axes_for(enc, p, seq, cfg.batch))
        feeds = enc.feeds(p, case, dtype, np.random.default_rng(0))
        first = enc.inputs(p)[0].name
        shape = list(feeds[first].shape)
        group: list[Row] = []

        def add(subject: str, kind: str, timing: tuple[float, float, float] | None, *, graph_bytes: int | None = None,
                note: str = "", profile: list | None = None) -> None:
            if timing is None:
                group.append(Row(enc_name, runtime, dtype_name, seq, subject, kind, shape, float("nan"), float("nan"), float("nan"), note=note))
            else:
                group.append(Row(enc_name, runtime, dtype_name, seq, subject, kind, shape, *timing, graph_bytes=graph_bytes, note=note, profile=profile or []))

        # copy: the limit
        copy = copy_model(dtype.onnx, len(shape))
        sess = BoundSession(export.serialize(copy), runtime, cfg.threads, {"x": feeds[first]}, {"y": (tuple(shape), dtype.numpy, dtype.onnx)})
        sess()
        if not np.array_equal(sess.output("y").view(np.uint8), np.ascontiguousarray(feeds[first]).view(np.uint8)):
            raise PosexportError("copy baseline: the bound output does not hold the input; the limit would be wrong")
        add("copy", "baseline", time_calls(sess, cfg.warmup, cfg.repeats), graph_bytes=len(export.serialize(copy)))
        tick(f"{enc_name} {runtime} {dtype_name} seq {seq}: copy")

        # the seed tutorial's export
        if enc.family == "rope" and p.rotary_dim == p.head_dim and p.layout == "bshd" and p.pair_layout == "half":
            model = naive_export(p.heads, p.head_dim, max(seq, 4096), p.base, dtype)
            data = export.serialize(model)
            sess = BoundSession(data, runtime, cfg.threads, {"x": feeds["x"]}, {"y": (tuple(shape), dtype.numpy, dtype.onnx)}, profile=cfg.profile)
            timing = time_calls(sess, cfg.warmup, cfg.repeats)
            add("naive-export", "baseline", timing, graph_bytes=len(data), profile=sess.profile() if cfg.profile else None)
        elif enc.family == "rope":
            add("naive-export", "baseline", None, note="the tutorial module is rope, bshd, half pairs, full rotary only")
        tick(f"{enc_name} {runtime} {dtype_name} seq {seq}: naive export")

        # PyTorch eager, the encoding's own module
        key = (enc_name, dtype_name, "portable")
        art = artifacts.get(key) or export.build(enc, p, dtype=dtype_name, backend="portable")
        artifacts[key] = art
        if runtime == "ort-cpu":
            module = enc.torch_module(p, art.options).eval()
            tensors = [torch_tensor(feeds[s.name]) for s in enc.inputs(p)]

            def eager() -> None:
                with torch.no_grad():
                    module(*tensors)

            add("torch-eager", "baseline", time_calls(eager, cfg.warmup, cfg.repeats), note=f"torch {cfg.threads} thread(s)")
        else:
            add("torch-eager", "baseline", None, note="timed on CPU only")
        tick(f"{enc_name} {runtime} {dtype_name} seq {seq}: torch eager")

        # the backends
        for name in cfg.backends:
            if enc.family != "rope" and name not in (rope_backends.AUTO, rope_backends.PORTABLE):
                tick(f"{enc_name} {runtime} {dtype_name} seq {seq}: {name} (rope only)")
                continue
            try:
                resolved = rope_backends.resolve_backend(name, enc.family, backend_opset(name, cfg.target), cfg.target)
            except PosexportError as e:
                add(name, "backend", None, note=str(e))
                tick(f"{enc_name} {runtime} {dtype_name} seq {seq}: {name}")
                continue
            label = f"auto ({resolved})" if name == rope_backends.AUTO else name
            key = (enc_name, dtype_name, resolved)
            art = artifacts.get(key) or export.build(enc, p, dtype=dtype_name, backend=resolved, opset=backend_opset(resolved, cfg.target))
            artifacts[key] = art
            in_feeds = {s.name: feeds[s.name] for s in enc.inputs(p)}
            try:
                sess = BoundSession(art.model_bytes, runtime, cfg.threads, in_feeds, output_specs(enc, p, feeds, dtype), profile=cfg.profile)
                timing = time_calls(sess, cfg.warmup, cfg.repeats)
                add(label, "backend", timing, graph_bytes=art.manifest["bytes"], profile=sess.profile() if cfg.profile else None)
            except Exception as e:  # a provider without a kernel for this op: reported, not fatal
                add(label, "backend", None, note=f"could not run: {' '.join(str(e).split())[:200]}")
            tick(f"{enc_name} {runtime} {dtype_name} seq {seq}: {label}")

        copy_ms = group[0].median_ms
        for r in group:
            r.ratio_to_copy = r.median_ms / copy_ms
        rows += group

    if cfg.indexshare_layers:
        for runtime in cfg.runtimes:
            if runtime in skipped:
                continue
            for seq in block_seqs:
                rows += bench_indexshare(cfg, runtime, seq, tick)
    meta = machine_meta(cfg)
    meta["skipped_runtimes"] = skipped
    return BenchResult(meta, rows, check_targets(rows, cfg))


def params_for(enc: Encoding, values: dict[str, Any]) -> Any:
    """The encoding's parameters from the shared options: each encoding takes the ones it knows."""
    known = {f.name for f in dataclasses.fields(enc.Params)}
    return enc.params(**{k: v for k, v in values.items() if k in known})


def check_params(encodings: Sequence[str], values: dict[str, Any]) -> None:
    """An option that none of the chosen encodings takes is a mistake, not something to drop silently."""
    known = {f.name for e in encodings for f in dataclasses.fields(get_encoding(e).Params)}
    for name in values:
        if name not in known:
            raise PosexportError(f"--{name.replace('_', '-')}: none of the encodings {', '.join(encodings)} takes this option")


def backend_opset(name: str, target: str) -> int:
    """Each backend at the oldest opset it needs: opset 23 for onnx23 (and for auto with a standard
    target, so that it may choose RotaryEmbedding-23), the default otherwise."""
    if name == rope_backends.ONNX23 or (name == rope_backends.AUTO and target == "standard"):
        return max(export.DEFAULT_OPSET, rope_backends.BACKENDS[rope_backends.ONNX23].min_opset)
    return export.DEFAULT_OPSET


def bench_indexshare(cfg: BenchConfig, runtime: str, seq: int, tick: Callable[[str], None]) -> list[Row]:
    """Fused (GroupQueryAttention do_rotary, one gather) against unfused (rotation ops + attention ops),
    for a prompt (past 0, seq tokens) and a decode step (1 token after seq cached)."""
    p = dataclasses.replace(params_for(get_encoding("rope"), cfg.params), rotary_dim=None)
    rows: list[Row] = []
    for dtype_name in cfg.dtypes:
        if dtype_name == "bfloat16":
            continue
        blocks = {f: indexshare.build_block(p, layers=cfg.indexshare_layers, dtype=dtype_name, fused=f) for f in (True, False)}
        for step, (s, past) in (("prompt", (seq, 0)), ("decode", (1, seq))):
            timings: dict[bool, Row] = {}
            for fused, block in blocks.items():
                feeds = indexshare.feeds(block, cfg.batch, s, past, np.random.default_rng(0))
                ref_shapes = {o.name: tuple(feeds_shape(block, o.name, cfg.batch, s, past)) for o in block.model.graph.output}
                sess = BoundSession(block.model_bytes, runtime, cfg.threads, feeds,
                                    {n: (shape, block.dtype.numpy, block.dtype.onnx) for n, shape in ref_shapes.items()}, profile=cfg.profile)
                timing = time_calls(sess, cfg.warmup, cfg.repeats)
                subject = f"indexshare-{step}" + ("" if fused else "-unfused")
                timings[fused] = Row("rope", runtime, dtype_name, seq, subject, "indexshare", [cfg.batch, s, p.heads, p.head_dim], *timing,
                                     graph_bytes=block.manifest["bytes"], note=f"{cfg.indexshare_layers} layers, past {past}",
                                     profile=sess.profile() if cfg.profile else [])
                tick(f"indexshare {step} seq {seq} {'fused' if fused else 'unfused'}")
            timings[True].note += f"; {timings[False].median_ms / timings[True].median_ms:.2f}× faster than unfused"
            rows += [timings[True], timings[False]]
    return rows


def feeds_shape(block: indexshare.Block, name: str, batch: int, seq: int, past: int) -> list[int]:
    p, kv = block.params, block.kv_heads
    if name.startswith("output_"):
        return [batch, seq, p.heads * p.head_dim]
    return [batch, kv, past + seq, p.head_dim]


def machine_meta(cfg: BenchConfig) -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "command": "posexport " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if Path(sys.argv[0]).name == "posexport" else None,
        "threads": cfg.threads,
        "warmup": cfg.warmup,
        "repeats": cfg.repeats,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "versions": export.versions(),
        "params": {k: v for k, v in cfg.params.items()},
        "batch": cfg.batch,
        "time_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }


# --- targets (DESIGN 7) --------------------------------------------------------------------------------

ROPE_TARGET_SHAPE = [1, 2048, 32, 128]


def check_targets(rows: list[Row], cfg: BenchConfig) -> list[dict[str, Any]]:
    """DESIGN 7's targets for the rows that match their conditions (ORT CPU, float32)."""
    out: list[dict[str, Any]] = []

    def find(enc: str, subject_prefix: str, shape: list[int] | None = None) -> Row | None:
        for r in rows:
            if (r.encoding == enc and r.runtime == "ort-cpu" and r.dtype == "float32" and r.subject.startswith(subject_prefix)
                    and (shape is None or r.shape == shape) and np.isfinite(r.median_ms)):
                return r
        return None

    def target(name: str, value: float, limit: float, row: Row, higher_is_better: bool = False) -> None:
        met = value >= limit if higher_is_better else value <= limit
        miss = "" if met else f"missed by {abs(value / limit - 1) * 100:.0f}%"
        profile = ", ".join(f"{op} {share:.0%}" for op, share in row.profile)
        out.append({"target": name, "measured": round(value, 3), "limit": limit, "met": bool(met), "miss": miss,
                    "subject": row.subject, "profile": profile})

    auto, portable, naive = find("rope", "auto", ROPE_TARGET_SHAPE), find("rope", "portable", ROPE_TARGET_SHAPE), find("rope", "naive-export", ROPE_TARGET_SHAPE)
    if auto:
        target(f"rope {auto.subject} ≤ 1.15× copy", auto.ratio_to_copy, 1.15, auto)
    if portable:
        target("rope portable ≤ 4× copy", portable.ratio_to_copy, 4.0, portable)
        if naive:
            target("rope portable ≥ 1.5× faster than naive export", naive.median_ms / portable.median_ms, 1.5, portable, higher_is_better=True)
    for enc in ("alibi", "t5"):
        for r in rows:
            if r.encoding == enc and r.runtime == "ort-cpu" and r.dtype == "float32" and r.subject == "portable" and np.isfinite(r.median_ms):
                target(f"{enc} seq {r.seq} ≤ 1.5× writing its output once (copy)", r.ratio_to_copy, 1.5, r)
    return out


# --- rendering --------------------------------------------------------------------------------------------


def fmt(x: float, digits: int = 3) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def markdown(result: BenchResult, single_table_note: str | None = None) -> str:
    m = result.meta
    lines = ["# posexport bench", ""]
    if m.get("command"):
        lines += ["Command:", "", "```sh", m["command"], "```", ""]
    lines += [f"Measured {m['time_utc']} UTC on {m['cpu_count']} CPU(s) ({m['processor']}), load average "
              f"{' / '.join(str(x) for x in m['load_average'])} (1/5/15 min) at the end of the run; "
              f"{m['threads']} thread(s) for onnxruntime and torch; {m['warmup']} warm-up runs, median of {m['repeats']}.",
              "", "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()), ""]
    for runtime, why in m.get("skipped_runtimes", {}).items():
        lines += [f"- {runtime} not measured: {why}"]
    groups: dict[tuple, list[Row]] = {}
    for r in result.rows:
        groups.setdefault((r.encoding, r.runtime, r.dtype, r.seq, r.kind == "indexshare"), []).append(r)
    for (enc, runtime, dtype, seq, is_block), rs in groups.items():
        if is_block:
            lines += [f"## IndexShare attention block — {runtime}, {dtype}, seq {seq}", "",
                      "| subject | shape (q) | median ms | IQR ms | min ms | graph bytes | note |", "|---|---|---|---|---|---|---|"]
            lines += [f"| {r.subject} | {r.shape} | {fmt(r.median_ms)} | {fmt(r.iqr_ms)} | {fmt(r.min_ms)} | {r.graph_bytes or '—'} | {r.note} |" for r in rs]
        else:
            lines += [f"## {enc} — {runtime}, {dtype}, x {rs[0].shape}", "",
                      "| subject | median ms | IQR ms | min ms | × copy | graph bytes | note |", "|---|---|---|---|---|---|---|"]
            lines += [f"| {r.subject} | {fmt(r.median_ms)} | {fmt(r.iqr_ms)} | {fmt(r.min_ms)} | {fmt(r.ratio_to_copy, 2)} | "
                      f"{r.graph_bytes or '—'} | {r.note} |" for r in rs]
        profiled = [r for r in rs if r.profile]
        if profiled:
            lines += ["", "Profile (share of node time by op type, onnxruntime profiler):", ""]
            lines += [f"- {r.subject}: " + ", ".join(f"{op} {share:.0%}" for op, share in r.profile) for r in profiled]
        lines.append("")
    if result.targets:
        lines += ["## Targets (DESIGN 7)", "", "| target | measured | limit | met | profile of the subject |", "|---|---|---|---|---|"]
        lines += [f"| {t['target']} | {t['measured']} | {t['limit']} | {'yes' if t['met'] else 'NO — ' + t['miss']} | {t['profile'] or '—'} |"
                  for t in result.targets]
        lines.append("")
    if single_table_note:
        lines += ["## Graph size", "", single_table_note, ""]
    return "\n".join(lines)


def graph_size_note() -> str:
    """DESIGN 4.3: bytes of the 131072-position LLaMA-3.1 rope graph against one cos/sin table."""
    from .rope import scaling

    params: dict[str, Any] = {"head_dim": 128, "heads": 32, "base": 500000.0, "max_positions": 131072, "position_limit": 131072}
    if "llama3" in scaling.SCALINGS:  # LLaMA-3.1's own scaling, where this build has it
        params.update(scaling="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=8192)
    art = export.build("rope", params, backend="portable")
    n = art.params.rotary_dim // 2
    single = 2 * art.params.position_limit * n * 4
    fine, coarse = art.manifest["tables"]["fine_cos"][0], art.manifest["tables"]["coarse_cos"][0]
    return (f"LLaMA-3.1 rope graph ({', '.join(f'{k}={v}' for k, v in params.items())}), float32: "
            f"{art.manifest['bytes']:,} bytes ({art.manifest['bytes'] / 2**20:.2f} MiB) with two-level tables of "
            f"{fine} + {coarse} rows; one cos table and one sin table of {art.params.position_limit} rows would weigh "
            f"{single:,} bytes ({single / 2**20:.0f} MiB).")


def plot(result: BenchResult, path: str | Path) -> None:
    """Time and ratio to the copy against sequence length, one line per subject (and runtime/dtype)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result.rows if r.kind != "indexshare" and np.isfinite(r.median_ms)]
    if not rows:
        raise PosexportError("--plot: no timed rows to plot")
    series: dict[str, list[Row]] = {}
    several = len({(r.encoding, r.runtime, r.dtype) for r in rows}) > 1
    for r in rows:
        label = r.subject + (f" [{r.encoding} {r.runtime} {r.dtype}]" if several else "")
        series.setdefault(label, []).append(r)
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, rs in series.items():
        rs = sorted(rs, key=lambda r: r.seq)
        style = "--" if rs[0].kind == "baseline" else "-"
        ax_t.plot([r.seq for r in rs], [r.median_ms for r in rs], style, marker="o", label=label)
        ax_r.plot([r.seq for r in rs], [r.ratio_to_copy for r in rs], style, marker="o", label=label)
    for ax, ylabel in ((ax_t, "median time (ms)"), (ax_r, "time / copy")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.set_yscale("log")
    ax_r.axhline(1.0, color="grey", lw=0.8)
    ax_r.legend(fontsize=7, loc="best")
    fig.suptitle(f"posexport bench — {result.meta['threads']} thread(s)")
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write(path, buffer.getvalue())


def write(path: str | Path, data: bytes) -> None:
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
    except OSError as e:
        raise PosexportError(f"{target}: cannot write there ({e.strerror}); choose a writable path") from None
