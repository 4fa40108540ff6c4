"""Sinusoidal absolute position encoding (DESIGN 3.1, Vaswani et al.): y = x + PE[position_ids].

With n = d_model/2 frequencies ω_i = base^(−2i/d_model):

    interleaved: PE(p) = [sin(pω0) cos(pω0) sin(pω1) cos(pω1) … sin(pω(n−1)) cos(pω(n−1))]
    concat:      PE(p) = [sin(pω0) … sin(pω(n−1)) | cos(pω0) … cos(pω(n−1))]

sin and cos come from the same two-level float64 tables as rope (posexport.tables): every position below
the graph's limit is exact, including those past the P cached fine rows; a negative position or one at
or past the limit makes the runtime raise.
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
from ..dtypes import COMPUTE, DType
from ..params import check, check_choices, param
from ..tables import plain_inv_freq
from ..contract import BuildOptions, Case, Property, PropertyResult, Runner, Tables, TensorSpec
from ..script import POSEXPORT
from .base import Encoding
from .inputs import positions, random_normal, sequence_cases
from .two_level import TwoLevelCosSin, cos_sin_function

PAIR_LAYOUTS = ("interleaved", "concat")
DEFAULT_LIMIT = 1 << 17


@dataclass(frozen=True)
class SinusoidalParams:
    d_model: int = param(512, "channels of x (even)")
    base: float = param(10000.0, "frequency base b of ω_i = b^(−2i/d_model) (> 1)")
    pair_layout: str = param("interleaved", "sin/cos channel order: sin0 cos0 sin1 cos1 … or all sines then all cosines", PAIR_LAYOUTS)
    position_limit: int = param(DEFAULT_LIMIT, "positions the graph covers exactly (rounded up to its tables' P·Q); past them the runtime raises")

    def __post_init__(self) -> None:
        check_choices(self)
        check(isinstance(self.d_model, int) and self.d_model >= 2 and self.d_model % 2 == 0,
              "d_model", self.d_model, "sinusoidal needs an even dimension ≥ 2")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        check(1 <= self.position_limit <= 1 << 31, "position_limit", self.position_limit, "must be in [1, 2^31]")


# --- pure functions: frequencies, tables, the float64 oracle ---------------------------------------


def inv_freq(p: SinusoidalParams) -> np.ndarray:
    """ω_i = base^(−2i/d_model), i = 0 … d_model/2 − 1, float64."""
    return plain_inv_freq(p.d_model, p.base)


def build_sinusoidal_tables(p: SinusoidalParams) -> tables.TwoLevelTables:
    return tables.build_two_level(inv_freq(p), p.position_limit)


def arrange_pairs(sin: np.ndarray, cos: np.ndarray, pair_layout: str) -> np.ndarray:
    """sin, cos [..., n] -> PE [..., 2n] in the chosen channel order."""
    if pair_layout == "concat":
        return np.concatenate([sin, cos], axis=-1)
    return np.stack([sin, cos], axis=-1).reshape(sin.shape[:-1] + (2 * sin.shape[-1],))


def build_sinusoidal_pe(p: SinusoidalParams, position_ids: np.ndarray) -> np.ndarray:
    """PE[position_ids] in float64, straight from DESIGN 3.1."""
    theta = tables.angles(position_ids, inv_freq(p))
    return arrange_pairs(np.sin(theta), np.cos(theta), p.pair_layout)


def reference(p: SinusoidalParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    return x + build_sinusoidal_pe(p, np.asarray(feeds["position_ids"]))


# --- torch ------------------------------------------------------------------------------------------


class SinusoidalEmbedding(torch.nn.Module):
    """Holds the two-level tables as buffers; forward(x, position_ids) -> x + PE, any position below the limit."""

    def __init__(self, p: SinusoidalParams):
        super().__init__()
        self.p = p
        self.cos_sin = TwoLevelCosSin(build_sinusoidal_tables(p))

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos_sin(position_ids)
        if self.p.pair_layout == "concat":
            pe = torch.cat([sin, cos], dim=-1)
        else:
            pe = torch.stack([sin, cos], dim=-1).flatten(-2)
        return (x.to(torch.float32) + pe).to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def sinusoidal_functions(p: SinusoidalParams, t: tables.TwoLevelTables, io: DType, op: Any) -> list[Any]:
    """posexport.Sinusoidal(x, position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> y, and the
    functions it calls."""
    cos_sin = cos_sin_function(t, op)
    float32 = onnx.TensorProto.FLOAT
    out_type = io.onnx
    d_model = p.d_model

    if p.pair_layout == "concat":

        @script(POSEXPORT, default_opset=op)
        def SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            cos, sin = cos_sin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
            return op.Concat(sin, cos, axis=-1)

    else:

        @script(POSEXPORT, default_opset=op)
        def SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            cos, sin = cos_sin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
            # [b, s, n] pairs -> [b, s, n, 2] -> [b, s, 2n]: sin0 cos0 sin1 cos1 …
            last = op.Constant(value_ints=[-1])
            pairs = op.Concat(op.Unsqueeze(sin, last), op.Unsqueeze(cos, last), axis=-1)
            return op.Reshape(pairs, op.Constant(value_ints=[0, 0, d_model]))

    # float32 I/O adds directly: a Cast to the same type would cost onnxruntime a full copy.
    if out_type == float32:

        @script(POSEXPORT, default_opset=op)
        def Sinusoidal(x, position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            return op.Add(x, SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin))

    else:

        @script(POSEXPORT, default_opset=op)
        def Sinusoidal(x, position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            pe = SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
            return op.Cast(op.Add(op.Cast(x, to=float32), pe), to=out_type)

    return [Sinusoidal, cos_sin, SinusoidalRows]  # after the entry, callees before their callers


# --- properties on the built graph (DESIGN 1: boundedness, uniqueness, relative-position linearity) ---


def observed_pe(runner: Runner, p: SinusoidalParams, dtype: DType, rng: np.random.Generator, pos: np.ndarray) -> np.ndarray:
    """PE[pos] as the graph computes it: y − x for a small random x, in float64. pos: [n] positions."""
    x = (random_normal(rng, (1, len(pos), p.d_model), dtype).astype(np.float64) * 1e-3).astype(dtype.numpy)
    y = runner({"x": x, "position_ids": np.asarray(pos, dtype=np.int64)[None]})
    return (np.asarray(y).astype(np.float64) - x.astype(np.float64))[0]


def check_bounded(runner: Runner, p: SinusoidalParams, dtype: DType, rng: np.random.Generator) -> PropertyResult:
    limit = build_sinusoidal_tables(p).limit
    pos = np.unique(np.concatenate([np.arange(min(limit, 256)), rng.integers(0, limit, 256)]))
    pe = observed_pe(runner, p, dtype, rng, pos)
    excess = max(0.0, float(np.max(np.abs(pe))) - 1.0)
    tol = dtype.bound(limit)
    return PropertyResult(excess <= tol, f"max|PE| = {np.max(np.abs(pe)):.6f} over {len(pos)} positions (bound 1 + {tol:.1e})", excess)


def check_unique(runner: Runner, p: SinusoidalParams, dtype: DType, rng: np.random.Generator) -> PropertyResult:
    """Rows of the cached range [0, P) lie pairwise further apart (Euclidean) than the dtype's noise."""
    rows = build_sinusoidal_tables(p).fine_rows
    pe = observed_pe(runner, p, dtype, rng, np.arange(rows))
    sq = np.sum(pe * pe, axis=1)
    gap = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * pe @ pe.T, 0.0))
    np.fill_diagonal(gap, np.inf)
    closest = float(np.min(gap))
    need = 4 * dtype.bound(rows) * math.sqrt(p.d_model)
    return PropertyResult(closest > need, f"closest pair of the {rows} cached rows is {closest:.3e} apart (needs > {need:.1e})",
                          max(0.0, need - closest))


def check_shift_is_linear(runner: Runner, p: SinusoidalParams, dtype: DType, rng: np.random.Generator) -> PropertyResult:
    """PE(p + k) = PE(p)·M_k for one fixed matrix M_k: fitted by least squares on some positions, tested on
    others spread over the whole range (past the cached rows too)."""
    limit = build_sinusoidal_tables(p).limit
    worst = 0.0
    samples = max(4 * p.d_model, 256)
    for k in (1, 7, 1000):
        pos = rng.choice(limit - k, size=2 * samples, replace=False)
        before = observed_pe(runner, p, dtype, rng, pos)
        after = observed_pe(runner, p, dtype, rng, pos + k)
        fit, test = slice(0, samples), slice(samples, None)
        m, *_ = np.linalg.lstsq(before[fit], after[fit], rcond=None)
        residual = float(np.max(np.abs(before[test] @ m - after[test])))
        worst = max(worst, residual)
    # The fitted map amplifies the inputs' rounding by up to √d_model (an orthogonal map's row norms are 1).
    tol = dtype.bound(limit) * 4 * math.sqrt(p.d_model)
    return PropertyResult(worst <= tol, f"held-out residual of PE(p+k) ≈ PE(p)·M_k, k ∈ 1, 7, 1000: {worst:.3e} (bound {tol:.1e})", worst)


PROPERTIES = [
    Property("bounded", "every PE value lies in [−1, 1]", check_bounded),
    Property("unique-rows", "the cached rows are pairwise distinct", check_unique),
    Property("shift-linear", "PE(p + k) is one fixed linear map of PE(p) for every p", check_shift_is_linear),
]


# --- the encoding -----------------------------------------------------------------------------------


class SinusoidalEncoding(Encoding):
    name = "sinusoidal"
    family = "absolute"
    Params = SinusoidalParams
    position_scaled_tolerance = True

    def inputs(self, p: SinusoidalParams) -> list[TensorSpec]:
        return [TensorSpec("x", ("batch", "seq", p.d_model)), TensorSpec("position_ids", ("batch", "seq"), is_float=False)]

    def reference(self, p: SinusoidalParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return reference(p, feeds)

    def torch_module(self, p: SinusoidalParams, opts: BuildOptions) -> torch.nn.Module:
        return SinusoidalEmbedding(p)

    def tables(self, p: SinusoidalParams, opts: BuildOptions) -> Tables:
        return Tables(build_sinusoidal_tables(p).as_dict(COMPUTE.numpy))

    def script_functions(self, p: SinusoidalParams, opts: BuildOptions, op: Any) -> list[Any]:
        return sinusoidal_functions(p, build_sinusoidal_tables(p), opts.dtype, op)

    def feeds(self, p: SinusoidalParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        batch, seq = case.axes["batch"], case.axes["seq"]
        return {"x": random_normal(rng, (batch, seq, p.d_model), dtype), "position_ids": positions(rng, batch, seq, case)}

    def cases(self, p: SinusoidalParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        t = build_sinusoidal_tables(p)
        # No trained length here: the first interesting boundary is the end of the cached fine rows.
        return sequence_cases(t.fine_rows, t.limit, seqs, batches)

    def properties(self, p: SinusoidalParams) -> list[Property]:
        return PROPERTIES

    def largest_position(self, p: SinusoidalParams, feeds: Mapping[str, np.ndarray]) -> int | None:
        return int(np.max(feeds["position_ids"]))


ENCODING = SinusoidalEncoding()
