"""How a rope graph is expressed (docs/encodings.md, RoPE › Backends): the rotation, given per-token cos/sin.

Every backend builds the same onnxscript function, ``posexport.RopeRotate(x, cos, sin) -> y``:

    x    [batch, seq, heads, head_dim] (bshd), [batch, heads, seq, head_dim] (bhsd) or
         [batch, seq, heads·head_dim] (bsh), I/O dtype
    cos  [batch, seq, rotary_dim/2] float32, sin likewise (attention factor already inside; any
         scaling, dynamic or not, is decided before this step by the cos/sin function)
    y    shaped like x, I/O dtype: rotated leading rotary_dim channels, the rest passed through

so a backend only decides which ops do the rotation:

    portable  standard ops (Slice, Mul, Add), opset 17+, every runtime
    onnx23    the standard RotaryEmbedding op (opset 23): cos/sin given per token, no position_ids
    ort       onnxruntime's com.microsoft.RotaryEmbedding, which only reads a cache through
              position_ids: the per-token cos/sin are flattened to rows [batch·seq, n] and
              position_ids = arange(batch·seq).reshape(batch, seq) picks row b·seq + s for token (b, s)

All of them compute in float32 and round once to the I/O dtype (docs/numerics.md); a float32 graph has
no Cast at all (onnxruntime does not remove a float32→float32 Cast: it costs a full copy of x).
Encodings other than rope have one expression: portable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import onnx
from onnxscript import script

from ..contract import AUTO, DEFAULT_TARGET, ONNX23, ORT, PORTABLE, TARGETS
from ..encodings.kinds.rotation import heads_axis
from ..errors import PosexportError, unknown
from ..script import MSFT, POSEXPORT

FLOAT = onnx.TensorProto.FLOAT


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str
    min_opset: int
    # Non-standard operator domains the graph then imports (runtimes without them cannot run it).
    domains: tuple[str, ...]
    # (p, io_onnx_type, op) -> onnxscript functions, callees first, RopeRotate last.
    rotation: Callable[[Any, int, Any], list[Any]]


# --- portable: standard ops -------------------------------------------------------------------------


def rotate_pairs_function(p: Any, op: Any, pack: bool) -> Any:
    """posexport.RopeRotatePairs(x_rot, cos, sin) -> x_rot·C + swap(x_rot)·S in float32 (portable_rotation);
    ``pack``: the two products are reshaped to [b, s, heads·d] before the Add, which then writes y."""
    n, rot, axis = p.rotary_dim // 2, p.rotary_dim, heads_axis(p)
    half = p.pair_layout == "half"
    reverse_axis = 3 if half else 4  # the pair axis of the 5-D view

    @script(POSEXPORT, default_opset=op)
    def RopeRotatePairs(x_rot, cos, sin):
        # x_rot [..., rot] float32; cos/sin [b, s, n].
        if half:
            c = op.Concat(cos, cos, axis=-1)
            s = op.Concat(op.Neg(sin), sin, axis=-1)
            pairs = op.Reshape(x_rot, op.Constant(value_ints=[0, 0, 0, 2, n]))
        else:
            c = op.Reshape(op.Concat(op.Unsqueeze(cos, [-1]), op.Unsqueeze(cos, [-1]), axis=-1), op.Constant(value_ints=[0, 0, rot]))
            s = op.Reshape(op.Concat(op.Unsqueeze(op.Neg(sin), [-1]), op.Unsqueeze(sin, [-1]), axis=-1), op.Constant(value_ints=[0, 0, rot]))
            pairs = op.Reshape(x_rot, op.Constant(value_ints=[0, 0, 0, n, 2]))
        swapped = op.Slice(pairs, op.Constant(value_ints=[-1]), op.Constant(value_ints=[-3]), op.Constant(value_ints=[reverse_axis]), op.Constant(value_ints=[-1]))
        axes = op.Constant(value_ints=[axis])
        straight = op.Mul(x_rot, op.Unsqueeze(c, axes))
        turned = op.Mul(op.Reshape(swapped, op.Constant(value_ints=[0, 0, 0, rot])), op.Unsqueeze(s, axes))
        if pack:
            packed = op.Constant(value_ints=[0, 0, -1])
            straight, turned = op.Reshape(straight, packed), op.Reshape(turned, packed)
        return op.Add(straight, turned)

    return RopeRotatePairs


def portable_rotation(p: Any, out_type: int, op: Any) -> list[Any]:
    """y = x·C + swap(x)·S with one Slice doing the swap, so the rotation reads and writes x about four
    times where the textbook Split / four Muls / Sub / Add / Concat does it six times:

        half:        C = [cos | cos],            S = [−sin | sin],            swap(x) = [b | a]
        interleaved: C = [c0 c0 c1 c1 …],         S = [−s0 s0 −s1 s1 …],        swap(x) = [b0 a0 b1 a1 …]

    swap is a reversed Slice over the pair axis of a free reshape ([…, 2, n] for half, […, n, 2] for
    interleaved). C and S are built per token ([b, s, d], heads broadcast), 1/heads of x's size.

    A packed x (bsh) is viewed as [b, s, heads, d] (a free Reshape) and the result reshaped back before
    the last op that writes y (the Add, or the Cast), so that no Reshape writes the graph output: onnxruntime
    copies a Reshape into a graph output where elsewhere it is an alias."""
    rot, heads, head_dim = p.rotary_dim, p.heads, p.head_dim
    partial, cast, bsh = rot != head_dim, out_type != FLOAT, p.layout == "bsh"
    pack_in_add = bsh and not partial and not cast  # the Add writes y: pack its operands
    repack = bsh and not pack_in_add  # before the Cast (free) or after the Concat (a copy)
    cast_last, cast_partial = cast and not partial, cast and partial
    rotate_pairs = rotate_pairs_function(p, op, pack_in_add)

    @script(POSEXPORT, default_opset=op)
    def RopeRotate(x, cos, sin):
        if bsh:
            x4 = op.Reshape(x, op.Constant(value_ints=[0, 0, heads, head_dim]))
        else:
            x4 = x
        if partial:
            x_rot, x_pass = op.Split(x4, op.Constant(value_ints=[rot, head_dim - rot]), axis=-1)
        else:
            x_rot = x4
        if cast:
            y = rotate_pairs(op.Cast(x_rot, to=FLOAT), cos, sin)
        else:
            y = rotate_pairs(x_rot, cos, sin)
        if cast_partial:
            y = op.Cast(y, to=out_type)
        if partial:
            y = op.Concat(y, x_pass, axis=-1)
        if repack:
            y = op.Reshape(y, op.Constant(value_ints=[0, 0, -1]))
        if cast_last:
            y = op.Cast(y, to=out_type)
        return y

    return [rotate_pairs, RopeRotate]


# --- onnx23 and ort: one RotaryEmbedding op ---------------------------------------------------------


def fused_rotation(p: Any, out_type: int, op: Any, contrib: bool) -> list[Any]:
    """RopeRotate around one RotaryEmbedding op, which takes 4-D input as [batch, heads, seq, dim] (bhsd,
    as is) or 3-D input as [batch, seq, heads·dim] (bsh as is; bshd through a free reshape, and the
    result reshaped back: onnxruntime copies that last Reshape into the graph output, so bshd costs one
    more pass over x than bsh); partial rotary is its rotary_embedding_dim. x is Cast to float32 once and
    back once (not at all for float32 I/O).

    onnx23 (``contrib`` false): RotaryEmbedding-23 takes per-token cos/sin [batch, seq, n] without
    position_ids.
    ort (``contrib`` true): com.microsoft.RotaryEmbedding reads cos/sin only as a cache indexed by
    position_ids. Per-token rows [b·s, n] with position_ids = arange(b·s) reshaped to [b, s] hand every
    token its own row, exactly, whatever scaling or position produced it."""
    interleaved = 1 if p.pair_layout == "interleaved" else 0
    n, rot, heads = p.rotary_dim // 2, p.rotary_dim, p.heads
    bshd = p.layout == "bshd"
    cast = out_type != FLOAT

    @script(POSEXPORT, default_opset=op)
    def RopeRotate(x, cos, sin):
        if contrib:
            tokens = op.Shape(cos, start=0, end=2)
            rows = op.Reshape(op.Range(op.Constant(value_int=0), op.ReduceProd(tokens, keepdims=0), op.Constant(value_int=1)), tokens)
            table = op.Constant(value_ints=[-1, n])
        if cast:
            xf = op.Cast(x, to=FLOAT)
        else:
            xf = x
        if bshd:
            x_in = op.Reshape(xf, op.Constant(value_ints=[0, 0, -1]))
        else:
            x_in = xf
        if contrib:
            y = MSFT.RotaryEmbedding(x_in, rows, op.Reshape(cos, table), op.Reshape(sin, table),
                                     interleaved=interleaved, num_heads=heads, rotary_embedding_dim=rot)
        else:
            y = op.RotaryEmbedding(x_in, cos, sin, interleaved=interleaved, num_heads=heads, rotary_embedding_dim=rot)
        if bshd:
            y = op.Reshape(y, op.Shape(x))
        if cast:
            y = op.Cast(y, to=out_type)
        return y

    return [RopeRotate]


def onnx23_rotation(p: Any, out_type: int, op: Any) -> list[Any]:
    """The standard RotaryEmbedding op (opset 23), per-token cos/sin as they are."""
    return fused_rotation(p, out_type, op, contrib=False)


def ort_rotation(p: Any, out_type: int, op: Any) -> list[Any]:
    """onnxruntime's com.microsoft.RotaryEmbedding, each token reading its own row of cos/sin."""
    return fused_rotation(p, out_type, op, contrib=True)


def deinterleave_function(p: Any, op: Any) -> Any:
    """posexport.RopeDeinterleave(x) -> x with each head's channels (2i, 2i+1) moved to (i, i + d/2): a
    free reshape to pairs, one Transpose, a reshape back (exact in any dtype)."""
    n, heads = p.head_dim // 2, p.heads if p.layout == "bsh" else 0

    @script(POSEXPORT, default_opset=op)
    def RopeDeinterleave(x):
        pairs = op.Reshape(x, op.Constant(value_ints=[0, 0, heads, n, 2]))
        return op.Reshape(op.Transpose(pairs, perm=[0, 1, 2, 4, 3]), op.Shape(x))

    return RopeDeinterleave


def with_deinterleave(rotation: Callable[[Any, int, Any], list[Any]]) -> Callable[[Any, int, Any], list[Any]]:
    """A backend's rotation for the deinterleave layout: x de-interleaved, then its half-split rotation."""

    def build(p: Any, out_type: int, op: Any) -> list[Any]:
        if p.pair_layout != "deinterleave":
            return rotation(p, out_type, op)
        inner = rotation(dataclasses.replace(p, pair_layout="half"), out_type, op)
        deinterleave, rotate = deinterleave_function(p, op), inner[-1]

        @script(POSEXPORT, default_opset=op)
        def RopeRotateDeinterleaved(x, cos, sin):
            return rotate(deinterleave(x), cos, sin)

        return [*inner, deinterleave, RopeRotateDeinterleaved]

    return build


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(PORTABLE, "standard ONNX ops only (opset 17+), runs on every runtime", 17, (), with_deinterleave(portable_rotation)),
        Backend(ONNX23, "the standard RotaryEmbedding op (opset 23+)", 23, (), with_deinterleave(onnx23_rotation)),
        Backend(ORT, "onnxruntime's com.microsoft.RotaryEmbedding contrib op", 17, ("com.microsoft",), with_deinterleave(ort_rotation)),
    )
}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise PosexportError(unknown("--backend", name, "backend", [AUTO, *BACKENDS])) from None


def auto_backend(opset: int, target: str = DEFAULT_TARGET) -> str:
    """The fastest backend for the target at this opset. Measured on onnxruntime CPU (benchmarks/): the
    contrib op and RotaryEmbedding-23 run within noise of each other and 2–3× faster than the portable
    graph; the contrib op needs no opset 23, so it is onnxruntime's choice at any opset."""
    if target not in TARGETS:
        raise PosexportError(f"--target {target!r}: choose one of {', '.join(TARGETS)}")
    if target == "onnxruntime":
        return ORT
    return ONNX23 if opset >= BACKENDS[ONNX23].min_opset else PORTABLE


def resolve_backend(name: str, family: str, opset: int, target: str = DEFAULT_TARGET) -> str:
    """The concrete backend for a build. Only rope graphs have backends; `auto` is portable elsewhere."""
    if family != "rope":
        if name not in (AUTO, PORTABLE):
            raise PosexportError(f"--backend {name}: only rope graphs have backends; use --backend portable")
        return PORTABLE
    chosen = auto_backend(opset, target) if name == AUTO else get_backend(name).name
    need = BACKENDS[chosen].min_opset
    if opset < need:
        raise PosexportError(f"--backend {chosen} needs --opset {need} or newer (got {opset})")
    return chosen

