"""IndexShare (docs/encodings.md, RoPE › IndexShare; docs/contract.md): one cos/sin gather for every layer,
the rotation fused into attention.

The block graph stands for the attention of an N-layer decoder, projections left out:

    inputs   q_i [batch, seq, heads·head_dim], k_i / v_i [batch, seq, kv_heads·head_dim],
             past_key_i / past_value_i [batch, kv_heads, past, head_dim]   (i = 0 … N−1; past may be 0)
             position_ids [batch, seq] int64
    outputs  output_i [batch, seq, heads·head_dim],
             present_key_i / present_value_i [batch, kv_heads, past + seq, head_dim]

Token t of the new chunk is key number past + t and attends to keys 0 … past + t (causal, KV cache); q and k
turn by position_ids[b, t]; present_key holds rotated keys. Query head j reads kv head j // (heads/kv_heads).

Fused (the IndexShare graph): posexport.TwoLevelCosSin (or the scaling's own cos/sin function) runs ONCE on position_ids (two-level tables, every
scaling), then each layer's com.microsoft.GroupQueryAttention rotates q and k inside the kernel
(do_rotary=1), so rotated q/k are never written out between rotation and attention. GroupQueryAttention
reads cos/sin as a cache indexed by position_ids and insists on at least past + seq rows, so it gets the
per-token rows [batch·seq, n], zero-padded to past + seq rows, with position_ids = arange(batch·seq)
reshaped to [batch, seq] (row b·seq + t is token (b, t); the padding is never read). Handing it the full
table for positions [0, past + seq) instead would cost (past + seq)·n products per step rather than
batch·seq·n, for the same answer.

Unfused (the baseline it is measured against): the same single cos/sin function, then per layer
com.microsoft.RotaryEmbedding on q and k (the fastest separate rotation, posexport.backends) and attention
in standard ops (MatMul, Softmax), q grouped by kv head so keys and values are never repeated.

onnxruntime's CPU GroupQueryAttention rotates whole heads (rotary_dim = head_dim) and takes a chunk of more
than one token after a non-empty past only at batch 1 (it raises otherwise).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from . import export, params as params_mod
from .contract import DEFAULT_OPSET, Artifact, BuildOptions
from .dtypes import DType, get_dtype
from .encodings.inputs import random_normal
from .errors import ParamError
from .script import POSEXPORT, callees_first, called_functions, check_opset, standard_opset
from .rope.encoding import ENCODING as ROPE, RopeParams, reference as rope_reference

MSFT = "com.microsoft"
INT64, INT32, FLOAT = onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.FLOAT


@dataclass
class Block(Artifact):
    """A built artifact whose graph is a whole attention block: ``layers`` layers of ``kv_heads`` key/value
    heads reading one shared cos/sin lookup (``fused``: rotation inside GroupQueryAttention)."""

    layers: int = 2
    kv_heads: int = 1
    fused: bool = True

    @property
    def dtype(self) -> DType:
        return self.options.dtype

    @property
    def default_name(self) -> str:
        return "rope_indexshare" if self.fused else "rope_indexshare_unfused"


def layer_inputs(i: int) -> list[str]:
    return [f"q_{i}", f"k_{i}", f"v_{i}", f"past_key_{i}", f"past_value_{i}"]


def layer_outputs(i: int) -> list[str]:
    return [f"output_{i}", f"present_key_{i}", f"present_value_{i}"]


def build_block(
    params: Mapping[str, Any] | RopeParams | None = None,
    *,
    layers: int = 2,
    kv_heads: int | None = None,
    dtype: str = "float32",
    fused: bool = True,
    opset: int = DEFAULT_OPSET,
) -> Block:
    """The IndexShare attention block (``fused``) or its unfused baseline, for these rope parameters."""
    enc = ROPE
    p = params if isinstance(params, RopeParams) else enc.params(**(params or {}))
    kv = p.heads if kv_heads is None else kv_heads
    io = check_block(p, layers, kv, dtype)
    opts = BuildOptions(io, check_opset(opset), "ort")
    # [Rope, its cos/sin function, …]: the block calls the cos/sin function (whatever the scaling makes it)
    # once; the model carries every callee, as a rope graph does.
    functions = enc.script_functions(p, opts, standard_opset(opset))
    cos_sin = functions[1].name
    table_arrays = dict(enc.tables(p, opts).arrays)

    g = GraphBuilder()
    shared_nodes(g, p, io, cos_sin, list(table_arrays))
    for i in range(layers):
        (gqa_layer if fused else unfused_layer)(g, i, p, kv, io)

    inputs, outputs = block_signature(p, layers, kv, io)
    kind = "indexshare" if fused else "indexshare-unfused"
    graph = oh.make_graph(g.nodes, f"posexport_{kind.replace('-', '_')}", inputs, outputs,
                          initializer=[onh.from_array(a, n) for n, a in table_arrays.items()] + g.initializers)
    imports = {"": opset, POSEXPORT.domain: POSEXPORT.version, MSFT: 1}
    carried = callees_first([f.to_function_proto() for f in called_functions(functions)])
    model = oh.make_model(graph, functions=carried, ir_version=10,
                          opset_imports=[oh.make_opsetid(dom, ver) for dom, ver in sorted(imports.items())])
    model.producer_name = "posexport"
    model.doc_string = f"posexport rope {kind} attention block, {layers} layers"
    onnx.checker.check_model(model)
    data = export.serialize(model)
    manifest = {
        "encoding": "rope",
        "kind": kind,
        "params": params_mod.to_dict(p),
        "layers": layers,
        "kv_heads": kv,
        "dtype": io.name,
        "opset": opset,
        "backend": "ort",
        "inputs": [i.name for i in inputs],
        "outputs": [o.name for o in outputs],
        "versions": export.versions(),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    return Block(model, manifest, enc, p, opts, layers, kv, fused)


def block_signature(p: RopeParams, layers: int, kv: int, io: DType) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    """The block's graph inputs (every layer's q, k, v and past, then position_ids) and outputs."""
    d, h = p.head_dim, p.heads
    vi = oh.make_tensor_value_info
    inputs, outputs = [], []
    for i in range(layers):
        q, k, v, pk, pv = layer_inputs(i)
        o, prk, prv = layer_outputs(i)
        inputs += [vi(q, io.onnx, ["batch", "seq", h * d]), vi(k, io.onnx, ["batch", "seq", kv * d]),
                   vi(v, io.onnx, ["batch", "seq", kv * d]), vi(pk, io.onnx, ["batch", kv, "past", d]),
                   vi(pv, io.onnx, ["batch", kv, "past", d])]
        outputs += [vi(o, io.onnx, ["batch", "seq", h * d]), vi(prk, io.onnx, ["batch", kv, "total", d]),
                    vi(prv, io.onnx, ["batch", kv, "total", d])]
    inputs.append(vi("position_ids", INT64, ["batch", "seq"]))
    return inputs, outputs


def check_block(p: RopeParams, layers: int, kv: int, dtype: str) -> DType:
    """The block's I/O dtype, once layers, kv heads, rotary width and dtype are ones it can build."""
    if not isinstance(layers, int) or layers < 1:
        raise ParamError("layers", layers, "needs at least 1 layer")
    if not isinstance(kv, int) or kv < 1 or p.heads % kv:
        raise ParamError("kv_heads", kv, f"must divide heads={p.heads}")
    if p.rotary_dim != p.head_dim:
        raise ParamError("rotary_dim", p.rotary_dim, f"--indexshare rotates whole heads (GroupQueryAttention); use {p.head_dim}")
    if p.pair_layout == "deinterleave":
        raise ParamError("pair_layout", p.pair_layout, "--indexshare rotates inside GroupQueryAttention, which keeps the "
                         "channel order; use interleaved (the same attention scores)")
    io = get_dtype(dtype)
    if io.name == "bfloat16":
        raise ParamError("dtype", dtype, "--indexshare builds float32 or float16 (no bfloat16 attention on onnxruntime CPU)")
    return io


class GraphBuilder:
    """Nodes and small constant initializers, named in order of creation."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, value: Any, dtype: Any = np.int64) -> str:
        self.initializers.append(onh.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(self, op_type: str, inputs: list[str], outputs: list[str] | str, domain: str = "", **attrs: Any) -> str:
        outs = [outputs] if isinstance(outputs, str) else outputs
        self.nodes.append(oh.make_node(op_type, inputs, outs, domain=domain, name=outs[0], **attrs))
        return outs[0]


def shared_nodes(g: GraphBuilder, p: RopeParams, io: DType, cos_sin: str, table_names: list[str]) -> None:
    """What every layer shares: cos/sin rows (one gather), their row ids and the lengths."""
    n = p.rotary_dim // 2
    g.node(cos_sin, ["position_ids", *table_names], ["cos_tokens", "sin_tokens"], domain=POSEXPORT.domain)
    g.node("Shape", ["position_ids"], "batch_seq")
    g.node("ReduceProd", ["batch_seq"], "token_count", keepdims=0)
    g.node("Range", [g.const("zero", 0), "token_count", g.const("one", 1)], "row_range")
    g.node("Reshape", ["row_range", "batch_seq"], "rotary_rows")  # [batch, seq]: token (b, t) reads row b·seq + t
    g.node("Shape", ["past_key_0"], "past_len", start=2, end=3)
    g.node("Shape", ["position_ids"], "seq_len", start=1, end=2)
    g.node("Shape", ["position_ids"], "batch_len", start=0, end=1)
    g.node("Add", ["past_len", "seq_len"], "total_len")  # [1]
    for name in ("cos", "sin"):
        g.node("Reshape", [f"{name}_tokens", g.const(f"rows_{name}_shape", [-1, n])], f"{name}_rows_f32")
        g.node("Cast", [f"{name}_rows_f32"], f"{name}_rows", to=io.onnx)
    # GroupQueryAttention inputs: padded caches, seqlens_k = total − 1 per row, total length (int32).
    g.node("Sub", ["total_len", "token_count"], "pad_signed")
    g.node("Max", ["pad_signed", g.const("zero_1d", [0])], "pad_rows")
    g.node("Concat", ["pad_rows", g.const("n_1d", [n])], "pad_shape", axis=0)
    g.node("ConstantOfShape", ["pad_shape"], "pad_zeros", value=onh.from_array(np.zeros(1, io.numpy)))
    for name in ("cos", "sin"):
        g.node("Concat", [f"{name}_rows", "pad_zeros"], f"{name}_cache", axis=0)
    g.node("Sub", ["total_len", g.const("one_1d", [1])], "last_index")
    g.node("Expand", ["last_index", "batch_len"], "seqlens_k_64")
    g.node("Cast", ["seqlens_k_64"], "seqlens_k", to=INT32)
    g.node("Squeeze", ["total_len"], "total_len_scalar")
    g.node("Cast", ["total_len_scalar"], "total_sequence_length", to=INT32)


def gqa_layer(g: GraphBuilder, i: int, p: RopeParams, kv: int, io: DType) -> None:
    g.node(
        "GroupQueryAttention",
        [*layer_inputs(i), "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache", "rotary_rows"],
        layer_outputs(i),
        domain=MSFT,
        num_heads=p.heads,
        kv_num_heads=kv,
        do_rotary=1,
        rotary_interleaved=int(p.pair_layout == "interleaved"),
    )


def unfused_layer(g: GraphBuilder, i: int, p: RopeParams, kv: int, io: DType) -> None:
    """Rotate q and k with the contrib op, then attention in standard ops, queries grouped by kv head:

        q [b, s, kv·group·d] -> [b, kv, group·s, d];  scores = q·Kᵀ/√d + causal bias [group·s, total]
    """
    d, h = p.head_dim, p.heads
    group = h // kv
    il = int(p.pair_layout == "interleaved")
    q, k, v, past_k, past_v = layer_inputs(i)
    out, present_k, present_v = layer_outputs(i)
    if i == 0:
        causal_bias(g, group, io)
    g.node("RotaryEmbedding", [q, "rotary_rows", "cos_rows", "sin_rows"], f"q_rot_{i}", domain=MSFT, num_heads=h, interleaved=il)
    g.node("RotaryEmbedding", [k, "rotary_rows", "cos_rows", "sin_rows"], f"k_rot_{i}", domain=MSFT, num_heads=kv, interleaved=il)
    heads_shape = g.const(f"kv_heads_shape_{i}", [0, 0, kv, d])
    for name, src, past, present in (("k", f"k_rot_{i}", past_k, present_k), ("v", v, past_v, present_v)):
        g.node("Reshape", [src, heads_shape], f"{name}_heads_{i}")
        g.node("Transpose", [f"{name}_heads_{i}"], f"{name}_bhsd_{i}", perm=[0, 2, 1, 3])
        g.node("Concat", [past, f"{name}_bhsd_{i}"], present, axis=2)
    g.node("Reshape", [f"q_rot_{i}", g.const(f"q_group_shape_{i}", [0, 0, kv, group, d])], f"q_grouped_{i}")
    g.node("Transpose", [f"q_grouped_{i}"], f"q_kv_major_{i}", perm=[0, 2, 3, 1, 4])
    g.node("Reshape", [f"q_kv_major_{i}", g.const(f"q_rows_shape_{i}", [0, 0, -1, d])], f"q_rows_{i}")
    g.node("Mul", [f"q_rows_{i}", g.const(f"scale_{i}", 1 / math.sqrt(d), io.numpy)], f"q_scaled_{i}")
    g.node("Transpose", [present_k], f"k_t_{i}", perm=[0, 1, 3, 2])
    g.node("MatMul", [f"q_scaled_{i}", f"k_t_{i}"], f"scores_{i}")
    g.node("Add", [f"scores_{i}", "causal_bias"], f"masked_{i}")
    g.node("Softmax", [f"masked_{i}"], f"weights_{i}", axis=-1)
    g.node("MatMul", [f"weights_{i}", present_v], f"context_{i}")  # [b, kv, group·s, d]
    g.node("Reshape", [f"context_{i}", g.const(f"ctx_shape_{i}", [0, 0, group, -1, d])], f"context_grouped_{i}")
    g.node("Transpose", [f"context_grouped_{i}"], f"context_bshd_{i}", perm=[0, 3, 1, 2, 4])
    g.node("Reshape", [f"context_bshd_{i}", g.const(f"out_shape_{i}", [0, 0, -1])], out)


def causal_bias(g: GraphBuilder, group: int, io: DType) -> None:
    """[group·seq, total]: 0 where key j ≤ past + t for query row (·, t), −inf elsewhere."""
    g.node("Squeeze", ["past_len"], "past_scalar")
    g.node("Squeeze", ["total_len"], "total_scalar")
    g.node("Range", ["past_scalar", "total_scalar", "one"], "query_pos")
    g.node("Range", ["zero", "total_scalar", "one"], "key_pos")
    g.node("Unsqueeze", ["query_pos", g.const("axis_1", [1])], "query_col")
    g.node("Unsqueeze", ["key_pos", g.const("axis_0", [0])], "key_row")
    g.node("LessOrEqual", ["key_row", "query_col"], "visible")
    g.node("Where", ["visible", g.const("bias_zero", 0.0, io.numpy), g.const("bias_hidden", -np.inf, io.numpy)], "bias_rows")
    g.node("Tile", ["bias_rows", g.const("bias_tiles", [group, 1])], "causal_bias")


# --- the float64 reference: rotation, then attention ---------------------------------------------------


def reference(block: Block, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output in float64, unfused: rope (posexport.rope.encoding.reference) on q and k, then causal softmax attention over
    past + new keys, each query head reading kv head j // group."""
    p = dataclasses.replace(block.params, layout="bshd")
    d, h, kv = p.head_dim, p.heads, block.kv_heads
    pos = np.asarray(feeds["position_ids"])
    out: dict[str, np.ndarray] = {}
    for i in range(block.layers):
        q, k, v, pk, pv = (np.asarray(feeds[n]).astype(np.float64) for n in layer_inputs(i))
        b, s, _ = q.shape
        past = pk.shape[2]
        qr = rope_reference(dataclasses.replace(p, heads=h), {"x": q.reshape(b, s, h, d), "position_ids": pos})
        kr = rope_reference(dataclasses.replace(p, heads=kv), {"x": k.reshape(b, s, kv, d), "position_ids": pos})
        keys = np.concatenate([pk, kr.transpose(0, 2, 1, 3)], axis=2)  # [b, kv, T, d]
        values = np.concatenate([pv, v.reshape(b, s, kv, d).transpose(0, 2, 1, 3)], axis=2)
        group = h // kv
        k_per_head, v_per_head = np.repeat(keys, group, axis=1), np.repeat(values, group, axis=1)
        scores = qr.transpose(0, 2, 1, 3) @ k_per_head.transpose(0, 1, 3, 2) / math.sqrt(d)  # [b, h, s, T]
        total = past + s
        hidden = np.arange(total)[None, :] > (past + np.arange(s))[:, None]
        scores = np.where(hidden, -np.inf, scores)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        context = (weights @ v_per_head).transpose(0, 2, 1, 3).reshape(b, s, h * d)
        o, prk, prv = layer_outputs(i)
        out[o], out[prk], out[prv] = context, keys, values
    return out


def feeds(block: Block, batch: int, seq: int, past: int, rng: np.random.Generator, start: int | None = None) -> dict[str, np.ndarray]:
    """Random inputs; position_ids = start + past + t (start defaults to 0: positions = key numbers)."""
    p, kv, io = block.params, block.kv_heads, block.dtype
    d, h = p.head_dim, p.heads
    out: dict[str, np.ndarray] = {}
    for i in range(block.layers):
        q, k, v, pk, pv = layer_inputs(i)
        out[q] = random_normal(rng, (batch, seq, h * d), io)
        out[k] = random_normal(rng, (batch, seq, kv * d), io)
        out[v] = random_normal(rng, (batch, seq, kv * d), io)
        out[pk] = random_normal(rng, (batch, kv, past, d), io)
        out[pv] = random_normal(rng, (batch, kv, past, d), io)
    first = (start or 0) + past
    out["position_ids"] = np.broadcast_to(first + np.arange(seq), (batch, seq)).astype(np.int64).copy()
    return out
