"""2-D sine-cosine positions on a patch grid, MAE convention (docs/encodings.md).

Channel layout of PE(h, w) for dim D, n = D/4 frequencies ω_k = base^(−k/n), k = 0 … n−1:

    [ sin(w·ω_0) … sin(w·ω_(n−1)) | cos(w·ω_0) … cos(w·ω_(n−1)) | sin(h·ω_0) … | cos(h·ω_0) … ]
      └──────────── column index w (first half) ────────────────┘ └──── row index h (second half) ────┘

y = x + PE for x [batch, grid_h, grid_w, D]. cos/sin of every axis position come from two-level float64
tables (posexport.tables), so every grid up to the graph's limit is exact and a larger one raises.
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
from ..contract import BuildOptions, Property, Tables
from ..dtypes import COMPUTE, DType
from ..params import check, param
from ..script import POSEXPORT
from . import properties as props
from .kinds.grid import GridEncoding
from .two_level import TwoLevelCosSin, cos_sin_function

@dataclass(frozen=True)
class Sincos2dParams:
    dim: int = param(768, "channels of a patch token (divisible by 4)")
    base: float = param(10000.0, "frequency base (> 1)")
    max_grid: int = param(1024, "grid_h and grid_w the graph covers at least; a larger grid makes the runtime raise")

    def __post_init__(self) -> None:
        check(isinstance(self.dim, int) and self.dim >= 4 and self.dim % 4 == 0, "dim", self.dim,
              "must be a multiple of 4 (two axes × sin and cos), ≥ 4")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        check(1 <= self.max_grid <= 1 << 20, "max_grid", self.max_grid, "must be in [1, 2^20]")
        limits.check_tokens([("dim", self.dim)], "x (one grid cell each)")
        limits.check_two_level("dim", self.dim, self.dim // 4, self.max_grid)


# --- pure functions ---------------------------------------------------------------------------------


def frequencies(dim: int, base: float) -> np.ndarray:
    """ω_k = base^(−k/(D/4)), k = 0 … D/4 − 1, float64."""
    n = dim // 4
    return base ** (-np.arange(n, dtype=np.float64) / n)


def axis_embedding(positions: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """[len(positions), 2n]: [sin(p·ω) | cos(p·ω)] in float64."""
    theta = tables.angles(positions, omega)
    return np.concatenate([np.sin(theta), np.cos(theta)], axis=-1)


def build_sincos2d(h: int, w: int, dim: int, base: float) -> np.ndarray:
    """PE [h, w, dim] in float64: column half first, row half second."""
    omega = frequencies(dim, base)
    cols = axis_embedding(np.arange(w), omega)  # [w, D/2]
    rows = axis_embedding(np.arange(h), omega)  # [h, D/2]
    half = dim // 2
    return np.concatenate([np.broadcast_to(cols[None], (h, w, half)), np.broadcast_to(rows[:, None], (h, w, half))], axis=-1)


def reference(p: Sincos2dParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    return x + build_sincos2d(x.shape[1], x.shape[2], p.dim, p.base)[None]


def build_axis_tables(omega: np.ndarray, limit: int) -> tables.TwoLevelTables:
    return tables.build_two_level(omega, limit)


# --- torch: the grid-axis lookup shared with rope-2d ------------------------------------------------


class AxisCosSin(torch.nn.Module):
    """cos/sin [n, freqs] of positions 0 … n−1 from two-level tables; n past the tables raises."""

    def __init__(self, t: tables.TwoLevelTables):
        super().__init__()
        self.lookup = TwoLevelCosSin(t)

    def forward(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lookup(torch.arange(n))


class Sincos2dEmbedding(torch.nn.Module):
    def __init__(self, p: Sincos2dParams):
        super().__init__()
        self.half = p.dim // 2
        self.axis = AxisCosSin(build_axis_tables(frequencies(p.dim, p.base), p.max_grid))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[1], x.shape[2]
        cos_w, sin_w = self.axis(w)
        cos_h, sin_h = self.axis(h)
        cols = torch.cat([sin_w, cos_w], dim=-1)[None].expand(h, w, self.half)
        rows = torch.cat([sin_h, cos_h], dim=-1)[:, None].expand(h, w, self.half)
        return (x.to(torch.float32) + torch.cat([cols, rows], dim=-1)).to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def axis_cos_sin_functions(t: tables.TwoLevelTables, op: Any) -> list[Any]:
    """posexport.GridAxisCosSin(n, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin [n, freqs]
    for positions 0 … n−1 (n a scalar), and the lookup it calls; n past the tables raises."""
    lookup = cos_sin_function(t, op)

    @script(POSEXPORT, default_opset=op)
    def GridAxisCosSin(n, fine_cos, fine_sin, coarse_cos, coarse_sin):
        positions = op.Range(op.Constant(value_int=0), n, op.Constant(value_int=1))
        cos, sin = lookup(positions, fine_cos, fine_sin, coarse_cos, coarse_sin)
        return cos, sin

    return [GridAxisCosSin, lookup]


def sincos2d_functions(p: Sincos2dParams, t: tables.TwoLevelTables, io: DType, op: Any) -> list[Any]:
    axis, lookup = axis_cos_sin_functions(t, op)
    half = p.dim // 2
    float32, out_type = onnx.TensorProto.FLOAT, io.onnx

    @script(POSEXPORT, default_opset=op)
    def Sincos2d(x, fine_cos, fine_sin, coarse_cos, coarse_sin):
        shape = op.Shape(x)
        h = op.Gather(shape, op.Constant(value_int=1))
        w = op.Gather(shape, op.Constant(value_int=2))
        cos_w, sin_w = axis(w, fine_cos, fine_sin, coarse_cos, coarse_sin)
        cos_h, sin_h = axis(h, fine_cos, fine_sin, coarse_cos, coarse_sin)
        grid = op.Concat(op.Slice(shape, op.Constant(value_ints=[1]), op.Constant(value_ints=[3])),
                         op.Constant(value_ints=[half]), axis=0)  # [H, W, D/2]
        cols = op.Expand(op.Unsqueeze(op.Concat(sin_w, cos_w, axis=-1), op.Constant(value_ints=[0])), grid)
        rows = op.Expand(op.Unsqueeze(op.Concat(sin_h, cos_h, axis=-1), op.Constant(value_ints=[1])), grid)
        pe = op.Concat(cols, rows, axis=-1)
        return op.Cast(op.Add(op.Cast(x, to=float32), pe), to=out_type)

    return [Sincos2d, axis, lookup]


# --- the encoding -----------------------------------------------------------------------------------


class Sincos2dEncoding(GridEncoding):
    name = "sincos-2d"
    Params = Sincos2dParams
    oracle = staticmethod(reference)
    Module = Sincos2dEmbedding

    def token_dims(self, p: Sincos2dParams) -> tuple[int, ...]:
        return (p.dim,)

    def grid_limit(self, p: Sincos2dParams) -> int:
        return build_axis_tables(frequencies(p.dim, p.base), p.max_grid).limit

    def tables(self, p: Sincos2dParams, opts: BuildOptions) -> Tables:
        return Tables(build_axis_tables(frequencies(p.dim, p.base), p.max_grid).as_dict(COMPUTE.numpy))

    def script_functions(self, p: Sincos2dParams, opts: BuildOptions, op: Any) -> list[Any]:
        t = build_axis_tables(frequencies(p.dim, p.base), p.max_grid)
        return sincos2d_functions(p, t, opts.dtype, op)

    def properties(self, p: Sincos2dParams) -> list[Property]:
        """Every PE value (y − x on a row of the grid, as wide as the graph covers) lies in [−1, 1]."""
        return [props.bounded(props.rows_of_grid(p.dim), self.grid_limit(p))]


ENCODING = Sincos2dEncoding()
