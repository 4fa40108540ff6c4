"""The rows every group of a bench carries beside the backends (docs/benchmarks.md reads them):

    copy          a graph whose output is a copy of its first input, run with the output bound to a
                  preallocated buffer (I/O binding on onnxruntime): the runtime must write every byte of
                  it, so this is the cost of reading the tensor once and writing it once — the floor for
                  any op that has to produce it. (A graph `Identity` would otherwise hand back the input's
                  own buffer, and `x + 0` or `x * 1` are removed by onnxruntime's no-op elimination, so a
                  plain run of either measures an allocation, not a write. The bound output is checked to
                  really hold x.)
    naive-export  rope only: the seed tutorial's RotaryPositionEmbedding (cos/sin cached for max_len,
                  sliced to seq_len, rotate_half with cat and neg) exported with torch.onnx as it stands
    contrib-full-cache  rope only: what onnxruntime-genai ships — com.microsoft.RotaryEmbedding on x packed
                  [batch, seq, heads·dim] (bhsd x as it is), reading a precomputed [positions, rotary_dim/2]
                  cos/sin cache that covers every position up to the call's, through position_ids
    torch-eager   the encoding's own torch module, eager (the `torch` runtime), in groups on the host

and the IndexShare attention block, fused against unfused.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import onnx
import onnx.helper as oh
import torch

from .. import export
from ..contract import DEFAULT_OPSET, Artifact, BuildOptions, Case
from ..dtypes import DType, get_dtype
from ..errors import PosexportError
from ..registry import get_encoding
from .. import indexshare
from ..rope.encoding import reference_cos_sin
from ..runtimes import Bound, Runtime, get_runtime
from .timing import BenchConfig, Group, Row, params_for

BASELINES = ("copy", "naive-export", "contrib-full-cache", "torch-eager")  # naive-export, contrib-full-cache: rope only


def bare_artifact(model: onnx.ModelProto, dtype: DType) -> Artifact:
    """A graph that no encoding built (a baseline, an attention block), for runtimes to load: it has no
    contract and no torch module, so only runtimes that run ONNX graphs take it."""
    return Artifact(model, {}, None, None, BuildOptions(dtype, DEFAULT_OPSET))


def copy_model(elem_type: int, rank: int) -> onnx.ModelProto:
    """y = Identity(x): with y bound to its own buffer, running it writes a full copy of x."""
    dims = [f"d{i}" for i in range(rank)]
    graph = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "copy",
                          [oh.make_tensor_value_info("x", elem_type, dims)], [oh.make_tensor_value_info("y", elem_type, dims)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", DEFAULT_OPSET)], ir_version=10)


def copy_row(group: Group, first: str) -> Row:
    """The limit: the group's first input copied into a bound output buffer."""
    x = group.feeds[first]
    art = bare_artifact(copy_model(get_dtype(group.dtype).onnx, x.ndim), get_dtype(group.dtype))

    def check(call: Bound) -> None:
        (y,) = call.outputs()
        if not np.array_equal(np.ascontiguousarray(y).view(np.uint8), np.ascontiguousarray(x).view(np.uint8)):
            raise PosexportError("copy baseline: the bound output does not hold the input; the limit would be wrong")

    return group.timed("copy", "baseline", art, feeds={"x": x}, profile=False, graph_bytes=len(art.model_bytes), check=check)


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


def naive_row(group: Group, p) -> Row:
    """The tutorial's export, where the rope parameters are the tutorial's (rope, bshd, half pairs, full rotary)."""
    if not (p.rotary_dim == p.head_dim and p.layout == "bshd" and p.pair_layout == "half"):
        return group.add("naive-export", "baseline", note="the tutorial module is rope, bshd, half pairs, full rotary only")
    dtype = get_dtype(group.dtype)
    art = bare_artifact(naive_export(p.heads, p.head_dim, max(group.seq, 4096), p.base, dtype), dtype)
    return group.timed("naive-export", "baseline", art, feeds={"x": group.feeds["x"]}, graph_bytes=len(art.model_bytes))


@functools.lru_cache(maxsize=4)
def contrib_full_cache(p, rows: int, rank: int, dtype: DType) -> onnx.ModelProto:
    """com.microsoft.RotaryEmbedding over a full [rows, rotary_dim/2] cos/sin cache (initializers, the
    scaling's frequencies at its trained length, attention factor inside), x of the given rank."""
    cos, sin = reference_cos_sin(p, np.arange(rows)[None])
    dims = [f"d{i}" for i in range(rank)]
    node = oh.make_node("RotaryEmbedding", ["x", "position_ids", "cos_cache", "sin_cache"], ["y"], domain="com.microsoft",
                        interleaved=int(p.pair_layout == "interleaved"), num_heads=p.heads, rotary_embedding_dim=p.rotary_dim)
    graph = oh.make_graph([node], "contrib_full_cache",
                          [oh.make_tensor_value_info("x", dtype.onnx, dims), oh.make_tensor_value_info("position_ids", onnx.TensorProto.INT64, dims[:2])],
                          [oh.make_tensor_value_info("y", dtype.onnx, dims)],
                          initializer=[onnx.numpy_helper.from_array(t[0].astype(dtype.numpy), name) for t, name in ((cos, "cos_cache"), (sin, "sin_cache"))])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", DEFAULT_OPSET), oh.make_opsetid("com.microsoft", 1)], ir_version=10)


def contrib_row(group: Group, p) -> Row:
    """onnxruntime-genai's rotary: the contrib op on packed x with a cache of every position up to the
    call's (x of a bshd group is handed over packed, a free view; bhsd x as it is)."""
    dtype, x, pos = get_dtype(group.dtype), group.feeds["x"], group.feeds["position_ids"]
    if dtype.name == "bfloat16":
        return group.add("contrib-full-cache", "baseline", note="the contrib op has no bfloat16 CPU kernel")
    x = x if p.layout == "bhsd" else x.reshape(x.shape[0], x.shape[1], -1)
    rows = max(p.max_positions, int(pos.max()) + 1)
    art = bare_artifact(contrib_full_cache(p, rows, x.ndim, dtype), dtype)
    return group.timed("contrib-full-cache", "baseline", art, feeds={"x": x, "position_ids": pos}, graph_bytes=len(art.model_bytes),
                       note=f"cache of {rows} positions")


def bias_only_row(group: Group, art: Artifact, case: Case) -> Row:
    """Attention biases: the same encoding built with ``--output bias``, [1, heads, q_len, k_len] from the
    positions alone; at batch 1 the group's copy is a copy of a tensor of its size (writing it once)."""
    feeds = art.encoding.feeds(art.params, case, art.options.dtype, np.random.default_rng(0))
    return group.timed("bias-only", "backend", art, feeds=feeds, graph_bytes=art.manifest["bytes"], note="--output bias")


def eager_row(group: Group, art: Artifact) -> Row:
    """The encoding's torch module on the `torch` runtime, timed in groups whose runtime computes on the
    host (a GPU group's copy is no yardstick for it)."""
    if group.runtime.device != "cpu":
        return group.add("torch-eager", "baseline", note="timed on CPU only")
    return group.timed("torch-eager", "baseline", art, runtime=get_runtime("torch"), note=f"torch, {group.cfg.threads} thread{'' if group.cfg.threads == 1 else 's'}")


def bench_indexshare(cfg: BenchConfig, runtime: Runtime, seq: int, tick: Callable[[str], None]) -> list[Row]:
    """Fused (GroupQueryAttention do_rotary, one gather) against unfused (rotation ops + attention ops),
    for a prompt (past 0, seq tokens) and a decode step (1 token after seq cached)."""
    p = dataclasses.replace(params_for(get_encoding("rope"), cfg.params), rotary_dim=None)
    rows: list[Row] = []
    for dtype_name in (d for d in cfg.dtypes if d != "bfloat16"):
        blocks = {f: indexshare.build_block(p, layers=cfg.indexshare_layers, dtype=dtype_name, fused=f) for f in (True, False)}
        for step, (s, past) in (("prompt", (seq, 0)), ("decode", (1, seq))):
            timed: dict[bool, Row] = {}
            group = Group(cfg, "rope", runtime, dtype_name, seq, [cfg.batch, s, p.heads, p.head_dim], {})
            for fused, block in blocks.items():
                subject = f"indexshare-{step}" + ("" if fused else "-unfused")
                timed[fused] = group.timed(subject, "indexshare", bare_artifact(block.model, block.dtype), graph_bytes=block.manifest["bytes"],
                                           feeds=indexshare.feeds(block, cfg.batch, s, past, np.random.default_rng(0)),
                                           note=f"{cfg.indexshare_layers} layers, past {past}")
            group.run()
            tick(f"indexshare {step} seq {seq}")
            if np.isfinite(timed[True].median_ms) and np.isfinite(timed[False].median_ms):
                timed[True].note += f"; {timed[False].median_ms / timed[True].median_ms:.2f}× faster than unfused"
            rows += [timed[True], timed[False]]
    return rows
