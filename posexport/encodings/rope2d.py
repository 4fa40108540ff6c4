"""2-D axial rotary embedding on a patch grid (docs/encodings.md): rows turn one half of the channels, columns
the other, each half rotated as in rope with its own d = head_dim/2.

Channel layout of one head (d = head_dim, n = d/4 frequencies θ_i = base^(−2i/(d/2)), i < n):

    half:        [ a0 … a(n−1) | b0 … b(n−1) ] [ a0 … a(n−1) | b0 … b(n−1) ]
    interleaved: [ a0 b0 a1 b1 … a(n−1) b(n−1) ] [ a0 b0 … a(n−1) b(n−1) ]
                   └──── row index h: angle h·θ_i ────┘ └──── column index w: angle w·θ_i ────┘

    y_a = a·cos − b·sin,  y_b = b·cos + a·sin

x is [batch, grid_h, grid_w, heads, head_dim]; positions are the grid indices 0 … grid_h−1 and
0 … grid_w−1. cos/sin come from two-level float64 tables, so any grid up to the graph's limit is exact.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
from onnxscript import script

from .. import tables
from .. import limits
from ..contract import BuildOptions, Property, Runner, Tables
from ..dtypes import COMPUTE, DType
from ..params import check, check_choices, param
from ..script import POSEXPORT
from . import properties as props
from .inputs import random_normal
from .kinds.grid import GridEncoding
from .kinds.rotation import PAIR_LAYOUTS, apply_rope
from .sincos2d import AxisCosSin, axis_cos_sin_functions


@dataclass(frozen=True)
class Rope2dParams:
    head_dim: int = param(64, "channels per attention head (divisible by 4: two axes × pairs)")
    heads: int = param(12, "attention heads")
    base: float = param(10000.0, "frequency base (> 1)")
    pair_layout: str = param("half", "which channels pair up within each axis' half", PAIR_LAYOUTS)
    max_grid: int = param(1024, "grid_h and grid_w the graph covers at least; a larger grid makes the runtime raise")

    def __post_init__(self) -> None:
        check_choices(self)
        check(isinstance(self.head_dim, int) and self.head_dim >= 4 and self.head_dim % 4 == 0, "head_dim",
              self.head_dim, "must be a multiple of 4 (two axes, each rotating pairs), ≥ 4")
        check(self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        check(1 <= self.max_grid <= 1 << 20, "max_grid", self.max_grid, "must be in [1, 2^20]")
        limits.check_tokens([("heads", self.heads), ("head_dim", self.head_dim)], "x (one grid cell each)")
        limits.check_two_level("head_dim", self.head_dim, self.head_dim // 4, self.max_grid)


# --- pure functions ---------------------------------------------------------------------------------


def inv_freq(p: Rope2dParams) -> np.ndarray:
    """θ_i = base^(−2i/d'), d' = head_dim/2 (each axis' half), i = 0 … d'/2 − 1, float64."""
    half = p.head_dim // 2
    return p.base ** (-np.arange(0, half, 2, dtype=np.float64) / half)


def build_axis_tables(p: Rope2dParams) -> tables.TwoLevelTables:
    return tables.build_two_level(inv_freq(p), p.max_grid)


def reference(p: Rope2dParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    _, h, w, _, d = x.shape
    theta = inv_freq(p)
    rows = tables.angles(np.arange(h), theta)[None, :, None, None]  # [1, H, 1, 1, n]
    cols = tables.angles(np.arange(w), theta)[None, None, :, None]  # [1, 1, W, 1, n]
    by_row = apply_rope(x[..., : d // 2], np.cos(rows), np.sin(rows), p.pair_layout)
    by_col = apply_rope(x[..., d // 2 :], np.cos(cols), np.sin(cols), p.pair_layout)
    return np.concatenate([by_row, by_col], axis=-1)


# --- torch ------------------------------------------------------------------------------------------


def rotate_torch(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pair_layout: str) -> torch.Tensor:
    n = cos.shape[-1]
    if pair_layout == "half":
        a, b = x[..., :n], x[..., n:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    pairs = x.unflatten(-1, (n, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)


class Rope2dEmbedding(torch.nn.Module):
    def __init__(self, p: Rope2dParams):
        super().__init__()
        self.p = p
        self.axis = AxisCosSin(build_axis_tables(p))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cos_h, sin_h = self.axis(x.shape[1])  # [H, n]
        cos_w, sin_w = self.axis(x.shape[2])  # [W, n]
        xf = x.to(torch.float32)
        half = self.p.head_dim // 2
        by_row = rotate_torch(xf[..., :half], cos_h[:, None, None], sin_h[:, None, None], self.p.pair_layout)
        by_col = rotate_torch(xf[..., half:], cos_w[:, None], sin_w[:, None], self.p.pair_layout)
        return torch.cat([by_row, by_col], dim=-1).to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def rotate_function(p: Rope2dParams, op: Any) -> Any:
    """posexport.Rope2dRotate(x_half, cos, sin) -> rotated half [batch, H, W, heads, d/2], float32."""
    n = p.head_dim // 4
    if p.pair_layout == "half":

        @script(POSEXPORT, default_opset=op)
        def Rope2dRotateHalf(x_half, cos, sin):
            a, b = op.Split(x_half, op.Constant(value_ints=[n, n]), axis=-1)
            ya = op.Sub(op.Mul(a, cos), op.Mul(b, sin))
            yb = op.Add(op.Mul(b, cos), op.Mul(a, sin))
            return op.Concat(ya, yb, axis=-1)

        return Rope2dRotateHalf

    @script(POSEXPORT, default_opset=op)
    def Rope2dRotateInterleaved(x_half, cos, sin):
        # [..., a0 b0 a1 b1 …] -> pairs [..., n, 2]; cos/sin gain a trailing axis of 1.
        pairs = op.Reshape(x_half, op.Constant(value_ints=[0, 0, 0, 0, n, 2]))
        a, b = op.Split(pairs, op.Constant(value_ints=[1, 1]), axis=-1)
        c = op.Unsqueeze(cos, op.Constant(value_ints=[-1]))
        s = op.Unsqueeze(sin, op.Constant(value_ints=[-1]))
        ya = op.Sub(op.Mul(a, c), op.Mul(b, s))
        yb = op.Add(op.Mul(b, c), op.Mul(a, s))
        return op.Reshape(op.Concat(ya, yb, axis=-1), op.Constant(value_ints=[0, 0, 0, 0, 2 * n]))

    return Rope2dRotateInterleaved


def rope2d_functions(p: Rope2dParams, t: tables.TwoLevelTables, io: DType, op: Any) -> list[Any]:
    axis, lookup = axis_cos_sin_functions(t, op)
    rotate = rotate_function(p, op)
    half = p.head_dim // 2
    float32, out_type = onnx.TensorProto.FLOAT, io.onnx

    @script(POSEXPORT, default_opset=op)
    def Rope2d(x, fine_cos, fine_sin, coarse_cos, coarse_sin):
        shape = op.Shape(x)
        cos_h, sin_h = axis(op.Gather(shape, op.Constant(value_int=1)), fine_cos, fine_sin, coarse_cos, coarse_sin)
        cos_w, sin_w = axis(op.Gather(shape, op.Constant(value_int=2)), fine_cos, fine_sin, coarse_cos, coarse_sin)
        x_row, x_col = op.Split(op.Cast(x, to=float32), op.Constant(value_ints=[half, half]), axis=-1)
        row_axes = op.Constant(value_ints=[1, 2])  # [H, n] -> [H, 1, 1, n] against [batch, H, W, heads, n]
        col_axes = op.Constant(value_ints=[1])  # [W, n] -> [W, 1, n]
        by_row = rotate(x_row, op.Unsqueeze(cos_h, row_axes), op.Unsqueeze(sin_h, row_axes))
        by_col = rotate(x_col, op.Unsqueeze(cos_w, col_axes), op.Unsqueeze(sin_w, col_axes))
        return op.Cast(op.Concat(by_row, by_col, axis=-1), to=out_type)

    return [Rope2d, axis, lookup, rotate]


# --- properties (on runtime outputs) ----------------------------------------------------------------

PROPERTY_GRID = (6, 7)


def rotate_everywhere(run: Runner, p: Rope2dParams, v: np.ndarray, dtype: DType) -> np.ndarray:
    """R(h, w)·v for every cell of PROPERTY_GRID, from the runtime: [H·W, heads, d] in float64."""
    h, w = PROPERTY_GRID
    x = np.ascontiguousarray(np.broadcast_to(v, (1, h, w, p.heads, p.head_dim)), dtype=dtype.numpy)
    return np.asarray(run({"x": x}))[0].astype(np.float64).reshape(h * w, p.heads, p.head_dim)


def rotation_adapters(p: Rope2dParams) -> tuple[props.Pairwise, props.Rotate]:
    """The scores of every pair of rotated cells (for relative_2d), and a rotation of x at positions
    numbering the cells of PROPERTY_GRID row by row (for norm_preserved)."""
    h, w = PROPERTY_GRID
    cell_h, cell_w = np.divmod(np.arange(h * w), w)
    offset = (cell_h[None, :] - cell_h[:, None] + h) * (2 * w + 1) + (cell_w[None, :] - cell_w[:, None] + w)

    def scores(run: Runner, dtype: DType, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
        q, k = (random_normal(rng, (p.heads, p.head_dim), dtype) for _ in range(2))
        rq, rk = rotate_everywhere(run, p, q, dtype), rotate_everywhere(run, p, k, dtype)
        norms = np.linalg.norm(q.astype(np.float64), axis=-1) * np.linalg.norm(k.astype(np.float64), axis=-1)
        return np.einsum("ahd,bhd->abh", rq, rk), offset, float(np.max(norms))

    def rotate(run: Runner, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        vectors = x.reshape(-1, p.heads, p.head_dim)
        grid = np.ascontiguousarray(np.broadcast_to(vectors[:, None, None], (len(vectors), h, w, p.heads, p.head_dim)))
        y = np.asarray(run({"x": grid})).reshape(len(vectors), h * w, p.heads, p.head_dim)
        return y[np.arange(len(vectors)), positions.reshape(-1)].reshape(x.shape)

    return scores, rotate


# --- the encoding -----------------------------------------------------------------------------------


class Rope2dEncoding(GridEncoding):
    name = "rope-2d"
    Params = Rope2dParams
    oracle = staticmethod(reference)
    Module = Rope2dEmbedding

    def token_dims(self, p: Rope2dParams) -> tuple[int, ...]:
        return (p.heads, p.head_dim)

    def grid_limit(self, p: Rope2dParams) -> int:
        return build_axis_tables(p).limit

    def tables(self, p: Rope2dParams, opts: BuildOptions) -> Tables:
        return Tables(build_axis_tables(p).as_dict(COMPUTE.numpy))

    def script_functions(self, p: Rope2dParams, opts: BuildOptions, op: Any) -> list[Any]:
        return rope2d_functions(p, build_axis_tables(p), opts.dtype, op)

    def properties(self, p: Rope2dParams) -> list[Property]:
        """Scores ⟨R(a)q, R(b)k⟩ depend only on the 2-D offset b − a, and rotation keeps every head
        vector's norm, over every cell of a 6×7 grid."""
        scores, rotate = rotation_adapters(p)
        cells = PROPERTY_GRID[0] * PROPERTY_GRID[1]
        return [
            props.relative_2d(scores, "the score ⟨R(a)q, R(b)k⟩"),
            props.norm_preserved(rotate, p.heads, p.head_dim, p.head_dim, cells, 1.0, lambda dtype, largest: dtype.bound()),
        ]


ENCODING = Rope2dEncoding()
