"""Sinusoidal absolute position encoding (Vaswani et al.; docs/encodings.md): y = x + PE[position_ids].

With n = d_model/2 frequencies ω_i = base^(−2i/d_model):

    interleaved: PE(p) = [sin(pω0) cos(pω0) sin(pω1) cos(pω1) … sin(pω(n−1)) cos(pω(n−1))]
    concat:      PE(p) = [sin(pω0) … sin(pω(n−1)) | cos(pω0) … cos(pω(n−1))]
    concat-cos:  PE(p) = [cos(pω0) … cos(pω(n−1)) | sin(pω0) … sin(pω(n−1))]   (fairseq's as MusicGen lays it out)

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
import torch
from onnxscript import script

from .. import tables
from .. import limits
from ..contract import BuildOptions, Case, Property, Tables
from ..dtypes import COMPUTE
from ..params import check, check_choices, param
from ..script import POSEXPORT
from ..tables import plain_inv_freq
from . import properties as props
from .inputs import sequence_cases
from .kinds.rows import AdditiveRows
from .two_level import TwoLevelCosSin, cos_sin_function

PAIR_LAYOUTS = ("interleaved", "concat", "concat-cos")
DEFAULT_LIMIT = 1 << 17


@dataclass(frozen=True)
class SinusoidalParams:
    d_model: int = param(512, "channels of x (even)")
    base: float = param(10000.0, "frequency base b of ω_i = b^(−2i/d_model) (> 1)")
    pair_layout: str = param("interleaved", "sin/cos channel order: sin0 cos0 sin1 cos1 …, all sines then all cosines, or all cosines then all sines",
                             PAIR_LAYOUTS)
    position_limit: int = param(DEFAULT_LIMIT, "positions the graph covers exactly (rounded up to its tables' P·Q); past them the runtime raises")

    def __post_init__(self) -> None:
        check_choices(self)
        check(isinstance(self.d_model, int) and self.d_model >= 2 and self.d_model % 2 == 0,
              "d_model", self.d_model, "sinusoidal needs an even dimension ≥ 2")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        check(1 <= self.position_limit <= 1 << 31, "position_limit", self.position_limit, "must be in [1, 2^31]")
        limits.check_tokens([("d_model", self.d_model)])
        limits.check_two_level("d_model", self.d_model, self.d_model // 2, self.position_limit)


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
    if pair_layout == "concat-cos":
        return np.concatenate([cos, sin], axis=-1)
    return np.stack([sin, cos], axis=-1).reshape(sin.shape[:-1] + (2 * sin.shape[-1],))


def build_sinusoidal_pe(p: SinusoidalParams, position_ids: np.ndarray) -> np.ndarray:
    """PE[position_ids] in float64, straight from the formula above."""
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
        elif self.p.pair_layout == "concat-cos":
            pe = torch.cat([cos, sin], dim=-1)
        else:
            pe = torch.stack([sin, cos], dim=-1).flatten(-2)
        return (x.to(torch.float32) + pe).to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def sinusoidal_functions(p: SinusoidalParams, t: tables.TwoLevelTables, op: Any) -> list[Any]:
    """posexport.SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> PE in float32,
    and the two-level lookup it calls; the kind wraps them in the entry posexport.Sinusoidal(x, position_ids,
    fine_cos, fine_sin, coarse_cos, coarse_sin) -> y."""
    cos_sin = cos_sin_function(t, op)
    d_model = p.d_model

    if p.pair_layout == "concat":

        @script(POSEXPORT, default_opset=op)
        def SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            cos, sin = cos_sin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
            return op.Concat(sin, cos, axis=-1)

    elif p.pair_layout == "concat-cos":

        @script(POSEXPORT, default_opset=op)
        def SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            cos, sin = cos_sin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
            return op.Concat(cos, sin, axis=-1)

    else:

        @script(POSEXPORT, default_opset=op)
        def SinusoidalRows(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
            cos, sin = cos_sin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
            # [b, s, n] pairs -> [b, s, n, 2] -> [b, s, 2n]: sin0 cos0 sin1 cos1 …
            last = op.Constant(value_ints=[-1])
            pairs = op.Concat(op.Unsqueeze(sin, last), op.Unsqueeze(cos, last), axis=-1)
            return op.Reshape(pairs, op.Constant(value_ints=[0, 0, d_model]))

    return [SinusoidalRows, cos_sin]  # the float32 core first, then what it calls


# --- the encoding -----------------------------------------------------------------------------------


class SinusoidalEncoding(AdditiveRows):
    name = "sinusoidal"
    entry = "Sinusoidal"
    Params = SinusoidalParams
    oracle = staticmethod(reference)
    Module = SinusoidalEmbedding
    position_scaled_tolerance = True

    def tables(self, p: SinusoidalParams, opts: BuildOptions) -> Tables:
        return Tables(build_sinusoidal_tables(p).as_dict(COMPUTE.numpy))

    def row_functions(self, p: SinusoidalParams, op: Any) -> list[Any]:
        return sinusoidal_functions(p, build_sinusoidal_tables(p), op)

    def position_limit(self, p: SinusoidalParams) -> int:
        return build_sinusoidal_tables(p).limit

    def cases(self, p: SinusoidalParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        t = build_sinusoidal_tables(p)
        # No trained length here: the first interesting boundary is the end of the cached fine rows.
        return self.within_limits(p, sequence_cases(t.fine_rows, t.limit, seqs, batches), seqs, batches)

    def row_properties(self, p: SinusoidalParams, rows: props.Rows) -> list[Property]:
        """Bounded in [−1, 1], the cached rows pairwise distinct, and PE(p + k) one fixed linear map of
        PE(p) over the whole range (past the cached rows too), where the graph covers enough positions to
        fit that map on some and test it on others."""
        t = build_sinusoidal_tables(p)
        shift = [props.linear_shift(rows, p.d_model, t.limit)] if t.limit >= props.linear_shift_positions(p.d_model) else []
        return [props.bounded(rows, t.limit), props.unique_rows(rows, t.fine_rows), *shift]


ENCODING = SinusoidalEncoding()
