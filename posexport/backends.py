"""How a rope graph is expressed (DESIGN 5): the rotation step, given per-token cos/sin.

Every backend builds the same onnxscript function, ``posexport.RopeRotate(x, cos, sin) -> y``:

    x    [batch, seq, heads, head_dim] (bshd) or [batch, heads, seq, head_dim] (bhsd), I/O dtype
    cos  [batch, seq, rotary_dim/2] float32, sin likewise (attention factor already inside; any
         scaling, dynamic or not, is decided before this step by posexport.RopeCosSin)
    y    shaped like x, I/O dtype: rotated leading rotary_dim channels, the rest passed through

so a backend only decides which ops do the rotation:

    portable  standard ops (Split, Mul, Sub, Add, Concat), opset 17+, every runtime
    onnx23    the standard RotaryEmbedding op (opset 23): cos/sin given per token, no position_ids
    ort       onnxruntime's com.microsoft.RotaryEmbedding, which only reads a cache through
              position_ids: the per-token cos/sin are flattened to rows [batch·seq, n] and
              position_ids = arange(batch·seq).reshape(batch, seq) picks row b·seq + s for token (b, s)

All of them compute in float32 and round once to the I/O dtype (DESIGN 4.1). Encodings other than rope
have one expression: portable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import onnx
from onnxscript import script
from onnxscript.values import Opset

from .errors import PosexportError

# The posexport function domain (the same object as encodings.base.POSEXPORT, kept here without the import
# cycle that importing the encodings package would make).
POSEXPORT = Opset("posexport", 1)
MSFT = Opset("com.microsoft", 1)
FLOAT = onnx.TensorProto.FLOAT

PORTABLE, ONNX23, ORT = "portable", "onnx23", "ort"
AUTO = "auto"
# Who `auto` optimises for (--target): onnxruntime (contrib ops allowed), or any runtime that implements
# the standard opset of the build.
TARGETS = ("onnxruntime", "standard")
DEFAULT_TARGET = "onnxruntime"


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str
    min_opset: int
    # Non-standard operator domains the graph then imports (runtimes without them cannot run it).
    domains: tuple[str, ...]
    # (p, io_onnx_type, op) -> onnxscript functions, callees first, RopeRotate last.
    rotation: Callable[[Any, int, Any], list[Any]]


def heads_axis(p: Any) -> int:
    return 2 if p.layout == "bshd" else 1


# --- portable: standard ops -------------------------------------------------------------------------


def portable_rotation(p: Any, out_type: int, op: Any) -> list[Any]:
    """Split into the two halves of each pair, four Muls, Sub/Add, Concat: every runtime runs it."""
    n, rot, axis = p.rotary_dim // 2, p.rotary_dim, heads_axis(p)
    if p.pair_layout == "half":

        @script(POSEXPORT, default_opset=op)
        def RopeRotateHalf(x_rot, cos, sin):
            # x_rot: [..., a0 … a(n−1) | b0 … b(n−1)]; cos/sin broadcast over heads.
            a, b = op.Split(x_rot, op.Constant(value_ints=[n, n]), axis=-1)
            ya = op.Sub(op.Mul(a, cos), op.Mul(b, sin))
            yb = op.Add(op.Mul(b, cos), op.Mul(a, sin))
            return op.Concat(ya, yb, axis=-1)

        pairs = RopeRotateHalf
    else:

        @script(POSEXPORT, default_opset=op)
        def RopeRotateInterleaved(x_rot, cos, sin):
            # x_rot: [..., a0 b0 a1 b1 …] -> pairs [..., n, 2]; cos/sin gain a trailing axis of 1.
            pairs = op.Reshape(x_rot, op.Constant(value_ints=[0, 0, 0, n, 2]))
            a, b = op.Split(pairs, op.Constant(value_ints=[1, 1]), axis=-1)
            c = op.Unsqueeze(cos, op.Constant(value_ints=[-1]))
            s = op.Unsqueeze(sin, op.Constant(value_ints=[-1]))
            ya = op.Sub(op.Mul(a, c), op.Mul(b, s))
            yb = op.Add(op.Mul(b, c), op.Mul(a, s))
            return op.Reshape(op.Concat(ya, yb, axis=-1), op.Constant(value_ints=[0, 0, 0, 2 * n]))

        pairs = RopeRotateInterleaved

    if rot == p.head_dim:

        @script(POSEXPORT, default_opset=op)
        def RopeRotate(x, cos, sin):
            axes = op.Constant(value_ints=[axis])
            y = pairs(op.Cast(x, to=FLOAT), op.Unsqueeze(cos, axes), op.Unsqueeze(sin, axes))
            return op.Cast(y, to=out_type)

    else:

        @script(POSEXPORT, default_opset=op)
        def RopeRotate(x, cos, sin):
            axes = op.Constant(value_ints=[axis])
            x_rot, x_pass = op.Split(x, op.Constant(value_ints=[rot, p.head_dim - rot]), axis=-1)
            y = pairs(op.Cast(x_rot, to=FLOAT), op.Unsqueeze(cos, axes), op.Unsqueeze(sin, axes))
            return op.Concat(op.Cast(y, to=out_type), x_pass, axis=-1)

    return [pairs, RopeRotate]


# --- onnx23: the standard RotaryEmbedding op ----------------------------------------------------------


def onnx23_rotation(p: Any, out_type: int, op: Any) -> list[Any]:
    """RotaryEmbedding-23 takes 4-D input as [batch, heads, seq, dim] (bhsd, as is) or 3-D input as
    [batch, seq, heads·dim] (bshd, a free reshape), and per-token cos/sin [batch, seq, n] without
    position_ids. Partial rotary is its rotary_embedding_dim."""
    interleaved = 1 if p.pair_layout == "interleaved" else 0
    rot, heads = p.rotary_dim, p.heads
    if p.layout == "bshd":

        @script(POSEXPORT, default_opset=op)
        def RopeRotate(x, cos, sin):
            x3 = op.Reshape(op.Cast(x, to=FLOAT), op.Constant(value_ints=[0, 0, -1]))
            y3 = op.RotaryEmbedding(x3, cos, sin, interleaved=interleaved, num_heads=heads, rotary_embedding_dim=rot)
            return op.Cast(op.Reshape(y3, op.Shape(x)), to=out_type)

    else:

        @script(POSEXPORT, default_opset=op)
        def RopeRotate(x, cos, sin):
            y = op.RotaryEmbedding(op.Cast(x, to=FLOAT), cos, sin, interleaved=interleaved, num_heads=heads, rotary_embedding_dim=rot)
            return op.Cast(y, to=out_type)

    return [RopeRotate]


# --- ort: com.microsoft.RotaryEmbedding ---------------------------------------------------------------


def ort_rotation(p: Any, out_type: int, op: Any) -> list[Any]:
    """The contrib op reads cos/sin only as a cache indexed by position_ids. Per-token rows [b·s, n]
    with position_ids = arange(b·s) reshaped to [b, s] hand every token its own row, exactly, whatever
    scaling or position produced it. Layouts as for onnx23: 3-D [b, s, h·d] for bshd, 4-D bhsd as is."""
    interleaved = 1 if p.pair_layout == "interleaved" else 0
    n, rot, heads = p.rotary_dim // 2, p.rotary_dim, p.heads
    if p.layout == "bshd":

        @script(POSEXPORT, default_opset=op)
        def RopeRotate(x, cos, sin):
            tokens = op.Shape(cos, start=0, end=2)
            rows = op.Reshape(op.Range(op.Constant(value_int=0), op.ReduceProd(tokens, keepdims=0), op.Constant(value_int=1)), tokens)
            table = op.Constant(value_ints=[-1, n])
            x3 = op.Reshape(op.Cast(x, to=FLOAT), op.Constant(value_ints=[0, 0, -1]))
            y3 = MSFT.RotaryEmbedding(x3, rows, op.Reshape(cos, table), op.Reshape(sin, table),
                                      interleaved=interleaved, num_heads=heads, rotary_embedding_dim=rot)
            return op.Cast(op.Reshape(y3, op.Shape(x)), to=out_type)

    else:

        @script(POSEXPORT, default_opset=op)
        def RopeRotate(x, cos, sin):
            tokens = op.Shape(cos, start=0, end=2)
            rows = op.Reshape(op.Range(op.Constant(value_int=0), op.ReduceProd(tokens, keepdims=0), op.Constant(value_int=1)), tokens)
            table = op.Constant(value_ints=[-1, n])
            y = MSFT.RotaryEmbedding(op.Cast(x, to=FLOAT), rows, op.Reshape(cos, table), op.Reshape(sin, table),
                                     interleaved=interleaved, num_heads=heads, rotary_embedding_dim=rot)
            return op.Cast(y, to=out_type)

    return [RopeRotate]


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(PORTABLE, "standard ONNX ops only (opset 17+), runs on every runtime", 17, (), portable_rotation),
        Backend(ONNX23, "the standard RotaryEmbedding op (opset 23+)", 23, (), onnx23_rotation),
        Backend(ORT, "onnxruntime's com.microsoft.RotaryEmbedding contrib op", 17, ("com.microsoft",), ort_rotation),
    )
}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise PosexportError(f"--backend {name!r}: unknown backend; choose one of {AUTO}, {', '.join(BACKENDS)}") from None


def auto_backend(opset: int, target: str = DEFAULT_TARGET) -> str:
    """The fastest backend for the target at this opset. Measured on onnxruntime CPU (benchmarks/): the
    contrib op and RotaryEmbedding-23 both run near the speed of a copy, the portable graph several times
    slower; the contrib op needs no opset 23, so it wins for onnxruntime at any opset."""
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


def runtime_gap(backend: str, params: Any, runtime: str) -> str | None:
    """Why a runtime cannot run this backend correctly, or None. Runtimes' ``supports`` consult it, keyed
    by the manifest's backend, so a known wrong answer is reported as unsupported instead of hidden."""
    if backend != ORT:
        return None
    if runtime == "reference":
        return "the ONNX reference evaluator has no com.microsoft contrib ops (build with --backend portable or onnx23)"
    if runtime == "openvino" and getattr(params, "rotary_dim", None) != getattr(params, "head_dim", None):
        return "OpenVINO ignores rotary_embedding_dim on com.microsoft.RotaryEmbedding (partial rotary: wrong output, no error)"
    return None
