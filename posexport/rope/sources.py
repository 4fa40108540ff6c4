"""The graph-side cos/sin sources a scaling declares (posexport.rope.scaling, ``Scaling.source``).

A source turns position_ids [batch, seq] into per-token cos/sin [batch, seq, rotary_dim/2] in float32,
attention factor included, from four arrays it stores as graph initializers. It is written three times
over the same arrays: the arrays themselves, a torch module, and an onnxscript function taking
``(position_ids, t0, t1, t2, t3)``.

    tables   fixed frequencies: two-level float64 tables (posexport.tables), exact below the limit
    regimes  two frequency sets (longrope's short and long factors) stacked in one set of tables; the
             whole call reads the second once seq_len = max(position_ids) + 1 exceeds the switch L0
    dynamic  frequencies decided from seq_len on every call and angles formed in float64 inside the
             graph (dynamic NTK), since no table can hold every length's frequencies

Every source raises on a position outside [0, limit) rather than wrapping around or reading another
regime's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
from onnxscript import script

from .. import tables
from ..dtypes import COMPUTE
from ..encodings.guards import OUT_OF_RANGE, name_nodes
from ..encodings.two_level import TwoLevelCosSin
from ..script import POSEXPORT
from . import scaling


@dataclass(frozen=True)
class CosSinSource:
    """How one kind of scaling reaches the graph: its arrays, its torch module, its onnxscript function."""

    arrays: Callable[[Any], dict[str, np.ndarray]]  # p -> the four initializers, in call order
    module: Callable[[Any], torch.nn.Module]  # p -> forward(position_ids) -> cos, sin
    function: Callable[[Any, Any], Any]  # (p, op) -> the onnxscript cos/sin function


def source_of(p: Any) -> CosSinSource:
    """The cos/sin source p's scaling declares."""
    return SOURCES[scaling.SCALINGS[p.scaling].source]


# --- the two-level lookup in few nodes ----------------------------------------------------------------


def packed_gather_function(op: Any, n: int) -> Any:
    """posexport.TwoLevelGather(fine, coarse, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin [..., n]:
    the angle-addition formula (posexport.tables) as one product of two gathered rows,

        [cos | sin] = [cf | cf]·[cc | sc] + [sf | sf]·[−sc | cc]    (summed over the two products)

    The packed rows ([P, 2, 2n] fine, [Q, 2, 2n] coarse) are built from the four tables by ops on
    initializers only, which onnxruntime folds once when it loads the graph; each call then runs two
    Gathers, a Mul, a ReduceSum and a Split, whatever the position or the table size. The values are those
    of cc·cf − sc·sf and sc·cf + cc·sf, bit for bit (a product negated is exact)."""

    @script(POSEXPORT, default_opset=op)
    def TwoLevelGather(fine, coarse, fine_cos, fine_sin, coarse_cos, coarse_sin):
        pair = op.Constant(value_ints=[1])
        fine_rows = op.Concat(op.Unsqueeze(op.Concat(fine_cos, fine_cos, axis=-1), pair),
                              op.Unsqueeze(op.Concat(fine_sin, fine_sin, axis=-1), pair), axis=1)
        coarse_rows = op.Concat(op.Unsqueeze(op.Concat(coarse_cos, coarse_sin, axis=-1), pair),
                                op.Unsqueeze(op.Concat(op.Neg(coarse_sin), coarse_cos, axis=-1), pair), axis=1)
        both = op.ReduceSum(op.Mul(op.Gather(fine_rows, fine), op.Gather(coarse_rows, coarse)), op.Constant(value_ints=[-2]), keepdims=0)
        cos, sin = op.Split(both, op.Constant(value_ints=[n, n]), axis=-1)
        return cos, sin

    # The fine rows are read modulo P; only the coarse lookup can be out of range.
    return name_nodes(TwoLevelGather, "Gather", OUT_OF_RANGE, skip=1)


# --- tables: fixed frequencies ----------------------------------------------------------------------


def fixed_tables(p: Any) -> tables.TwoLevelTables:
    inv_freq, factor = scaling.frequencies(p)
    return tables.build_two_level(inv_freq, p.position_limit, scale=factor)


class TableCosSin(torch.nn.Module):
    """cos/sin [b, s, n] from two-level tables: one regime, or two with the second read by the whole
    call once seq_len = max(position_ids) + 1 exceeds ``switch``."""

    def __init__(self, t: tables.TwoLevelTables, switch: int | None = None):
        super().__init__()
        self.lookup = TwoLevelCosSin(t)
        self.switch = switch

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.switch is None:
            return self.lookup(position_ids)
        return self.lookup(position_ids, (position_ids.max() + 1 > self.switch).to(torch.int64))


def fixed_cos_sin_function(p: Any, op: Any) -> Any:
    """posexport.TwoLevelCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin with
    as few nodes as the two-level lookup allows, since a decode step (one token) runs little else: a
    position at or past the limit P·Q already has a coarse index ≥ Q, so its Gather raises; only a negative
    one must be sent past the coarse rows (Less, Where), or Gather would read it from the end."""
    t = fixed_tables(p)
    fine_rows, past = t.fine_rows, t.limit
    gather = packed_gather_function(op, p.rotary_dim // 2)

    @script(POSEXPORT, default_opset=op)
    def TwoLevelCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        safe = op.Where(op.Less(position_ids, op.Constant(value_int=0)), op.Constant(value_int=past), position_ids)
        rows = op.Constant(value_int=fine_rows)
        cos, sin = gather(op.Mod(safe, rows), op.Div(safe, rows), fine_cos, fine_sin, coarse_cos, coarse_sin)
        return cos, sin

    return TwoLevelCosSin


FIXED = CosSinSource(
    arrays=lambda p: fixed_tables(p).as_dict(COMPUTE.numpy),
    module=lambda p: TableCosSin(fixed_tables(p)),
    function=fixed_cos_sin_function,
)


# --- regimes: two frequency sets, switched per call ----------------------------------------------------


def regime_tables(p: Any) -> tables.TwoLevelTables:
    """Regime 0 holds the frequencies for seq_len ≤ L0, regime 1 those for seq_len > L0."""
    original = scaling.switch_length(p)
    regimes = [scaling.frequencies(p, original), scaling.frequencies(p, original + 1)]
    return tables.stack_regimes([tables.build_two_level(f, p.position_limit, scale=a) for f, a in regimes])


def regime_cos_sin_function(p: Any, op: Any) -> Any:
    """posexport.RopeCosSinLongrope(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin:
    the two-level lookup of two_level.py with the regime decided per call."""
    t = regime_tables(p)
    fine_rows, coarse_rows, limit, past_every_regime = t.fine_rows, t.coarse_rows, t.limit, t.regimes * t.limit
    original = scaling.switch_length(p)
    gather = packed_gather_function(op, p.rotary_dim // 2)

    @script(POSEXPORT, default_opset=op)
    def RopeCosSinLongrope(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        # Tables hold two regimes (rows [0, P)/[0, Q): short factors; [P, 2P)/[Q, 2Q): long factors).
        # The long regime serves the whole call once seq_len = max(position_ids) + 1 exceeds L0.
        outside = op.Or(op.Less(position_ids, op.Constant(value_int=0)), op.GreaterOrEqual(position_ids, op.Constant(value_int=limit)))
        safe = op.Where(outside, op.Constant(value_int=past_every_regime), position_ids)
        seq_len = op.Add(op.ReduceMax(position_ids, keepdims=0), op.Constant(value_int=1))
        long = op.Cast(op.Greater(seq_len, op.Constant(value_int=original)), to=onnx.TensorProto.INT64)
        coarse = op.Add(op.Div(safe, op.Constant(value_int=fine_rows)), op.Mul(long, op.Constant(value_int=coarse_rows)))
        fine = op.Add(op.Mod(safe, op.Constant(value_int=fine_rows)), op.Mul(long, op.Constant(value_int=fine_rows)))
        cos, sin = gather(fine, coarse, fine_cos, fine_sin, coarse_cos, coarse_sin)
        return cos, sin

    return RopeCosSinLongrope


REGIMES = CosSinSource(
    arrays=lambda p: regime_tables(p).as_dict(COMPUTE.numpy),
    module=lambda p: TableCosSin(regime_tables(p), scaling.switch_length(p)),
    function=regime_cos_sin_function,
)


# --- dynamic: frequencies formed in the graph ------------------------------------------------------------


def dynamic_arrays(p: Any) -> dict[str, np.ndarray]:
    """Dynamic NTK's inputs, for angles formed in float64 inside the graph (no float32 angle ever exists):
    b'^(−2i/d) = θ_i · ratio^(−2i/(d−2)), ratio = 1 + (s/Lmax)·(L − Lmax), L = max(seq_len, Lmax)."""
    d = p.rotary_dim
    return {
        "inv_freq": tables.plain_inv_freq(d, p.base),
        "ratio_exponent": -np.arange(0, d, 2, dtype=np.float64) / (d - 2),
        "length_scale": np.array([p.factor / p.max_positions], dtype=np.float64),
        "max_positions": np.array([p.max_positions], dtype=np.int64),
    }


class DynamicCosSin(torch.nn.Module):
    """Dynamic NTK: frequencies from seq_len = max(position_ids) + 1 on every call, angles in float64."""

    def __init__(self, p: Any):
        super().__init__()
        for name, value in dynamic_arrays(p).items():
            self.register_buffer(name, torch.from_numpy(value), persistent=False)
        self.register_buffer("guard", torch.zeros(1, 1), persistent=False)
        self.limit = p.position_limit

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Positions outside [0, limit) index past a one-element guard: the lookup fails.
        outside = ((position_ids < 0) | (position_ids >= self.limit)).to(torch.int64)
        checked = position_ids + torch.nn.functional.embedding(outside, self.guard).squeeze(-1).to(torch.int64)
        length = torch.maximum(checked.max() + 1, self.max_positions).to(torch.float64)
        ratio = 1.0 + self.length_scale * (length - self.max_positions.to(torch.float64))
        inv_freq = self.inv_freq * ratio**self.ratio_exponent
        angles = checked.to(torch.float64).unsqueeze(-1) * inv_freq
        return torch.cos(angles).to(torch.float32), torch.sin(angles).to(torch.float32)


DOUBLE_ONE = onnx.numpy_helper.from_array(np.array([1.0], dtype=np.float64))


def dynamic_cos_sin_function(p: Any, op: Any) -> Any:
    """posexport.RopeCosSinDynamic(position_ids, inv_freq, ratio_exponent, length_scale, max_positions)
    -> cos, sin [b, s, n]: dynamic NTK decided from seq_len on every call, angles formed in float64."""
    limit = p.position_limit
    float64, float32 = onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT

    @script(POSEXPORT, default_opset=op)
    def RopeCosSinDynamic(position_ids, inv_freq, ratio_exponent, length_scale, max_positions):
        # Positions outside [0, limit) index past a one-element guard, so Gather raises.
        outside = op.Or(op.Less(position_ids, op.Constant(value_int=0)), op.GreaterOrEqual(position_ids, op.Constant(value_int=limit)))
        guard = op.Gather(op.Constant(value_ints=[0]), op.Cast(outside, to=onnx.TensorProto.INT64))
        checked = op.Add(position_ids, guard)
        seq_len = op.Add(op.ReduceMax(checked, keepdims=1), op.Constant(value_int=1))
        length = op.Max(op.Reshape(seq_len, op.Constant(value_ints=[1])), max_positions)
        ratio = op.Add(op.Constant(value=DOUBLE_ONE), op.Mul(length_scale, op.Cast(op.Sub(length, max_positions), to=float64)))
        freqs = op.Mul(inv_freq, op.Pow(ratio, ratio_exponent))
        angles = op.Mul(op.Unsqueeze(op.Cast(checked, to=float64), op.Constant(value_ints=[-1])), freqs)
        return op.Cast(op.Cos(angles), to=float32), op.Cast(op.Sin(angles), to=float32)

    return RopeCosSinDynamic


DYNAMIC = CosSinSource(arrays=dynamic_arrays, module=DynamicCosSin, function=dynamic_cos_sin_function)

SOURCES: dict[str, CosSinSource] = {scaling.TABLES: FIXED, scaling.REGIMES: REGIMES, scaling.DYNAMIC: DYNAMIC}
