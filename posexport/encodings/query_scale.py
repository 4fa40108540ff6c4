"""Position-dependent query scaling (docs/encodings.md, Query scaling): q multiplied per token by

    s(p) = 1 + β·ln(1 + ⌊(p + offset) / F⌋)

Llama-4's temperature tuning on its NoPE layers is β = attn_scale, F = floor_scale, offset 1 (it counts
positions from 1); Ministral-3 / Mistral-3's `llama_4_scaling_beta` is β, F =
original_max_position_embeddings, offset 0, on every layer. s(p) = 1 for p + offset < F.

    x             [batch, seq, heads, head_dim] (bshd), [batch, heads, seq, head_dim] (bhsd) or
                  [batch, seq, heads·head_dim] (bsh), I/O dtype
    position_ids  [batch, seq] int64, ≥ 0
    y             shaped like x: x · s(position_ids), broadcast over heads and channels

No table: the graph takes the integer floor ⌊(p + offset)/F⌋ exactly (int64 Div of non-negative numbers),
then ln, the scale and the product in float32, rounded once to the I/O dtype. Checked for positions below
2^30 (OpenVINO computes the positions in int32).
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

from ..contract import BuildOptions, Case, Tables, TensorSpec
from ..dtypes import DType
from ..params import check, check_choices, param
from ..script import POSEXPORT
from .base import Encoding
from .guards import position_guard, shared_axes
from .inputs import positions, random_normal, sequence_cases
from .kinds.rotation import LAYOUTS

FLOAT = onnx.TensorProto.FLOAT
# The sweep's largest position + 1. OpenVINO computes int64 positions in int32, so p + offset must stay
# below 2^31: the sweep stops at 2^30 (a model's positions are far below it).
SWEEP_LIMIT = 1 << 30


@dataclass(frozen=True)
class QueryScaleParams:
    heads: int = param(32, "attention heads")
    head_dim: int = param(128, "channels per attention head")
    layout: str = param("bshd", "axis order of x: [batch, seq, heads, dim], [batch, heads, seq, dim] or packed [batch, seq, heads·dim]", LAYOUTS)
    beta: float = param(0.1, "β: the scale grows by β·ln(1 + k) in the k-th block of F positions (Llama-4 attn_scale, llama_4_scaling_beta)")
    floor_scale: int = param(8192, "F: positions per step of the floor (Llama-4 floor_scale, Ministral-3 original_max_position_embeddings)")
    offset: int = param(0, "added to the position before the floor: 1 for Llama-4 (positions counted from 1), 0 for Ministral-3")
    max_positions: int = param(131072, "positions the model was trained for (the parity sweep goes past it)")

    def __post_init__(self) -> None:
        check_choices(self)
        check(self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        check(isinstance(self.head_dim, int) and self.head_dim >= 1, "head_dim", self.head_dim, "must be ≥ 1")
        check(math.isfinite(self.beta), "beta", self.beta, "must be a finite number")
        check(isinstance(self.floor_scale, int) and self.floor_scale >= 1, "floor_scale", self.floor_scale, "must be an integer ≥ 1")
        check(self.offset in (0, 1), "offset", self.offset, "must be 0 or 1")
        check(1 <= self.max_positions < SWEEP_LIMIT, "max_positions", self.max_positions, "must be in [1, 2^30)")


def x_shape(p: QueryScaleParams, batch: Any, seq: Any) -> tuple[Any, ...]:
    return {"bshd": (batch, seq, p.heads, p.head_dim), "bhsd": (batch, p.heads, seq, p.head_dim),
            "bsh": (batch, seq, p.heads * p.head_dim)}[p.layout]


def broadcast_axes(p: QueryScaleParams) -> list[int]:
    """Where s [batch, seq] gains axes to broadcast over x."""
    return {"bshd": [2, 3], "bhsd": [1, 3], "bsh": [2]}[p.layout]


def scale_reference(p: QueryScaleParams, position_ids: np.ndarray) -> np.ndarray:
    """s(p) in float64 [batch, seq]."""
    blocks = np.floor((np.asarray(position_ids, dtype=np.float64) + p.offset) / p.floor_scale)
    return 1.0 + p.beta * np.log1p(blocks)


def reference(p: QueryScaleParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    s = np.expand_dims(scale_reference(p, feeds["position_ids"]), broadcast_axes(p))
    return np.asarray(feeds["x"]).astype(np.float64) * s


class QueryScaleModule(torch.nn.Module):
    def __init__(self, p: QueryScaleParams):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        p = self.p
        blocks = torch.div(position_ids + p.offset, p.floor_scale, rounding_mode="floor").to(torch.float32)
        s = 1.0 + p.beta * torch.log(1.0 + blocks)
        for axis in broadcast_axes(p):
            s = s.unsqueeze(axis)
        return (x.to(torch.float32) * s).to(x.dtype)


def scale_function(p: QueryScaleParams, io: DType, op: Any, guard: Any) -> Any:
    """posexport.QueryScale(x, position_ids) -> x · s(position_ids), in float32, cast once."""
    offset, floor_scale, beta, axes = p.offset, p.floor_scale, float(p.beta), broadcast_axes(p)
    cast = io.name != "float32"
    out_type = io.onnx

    @script(POSEXPORT, default_opset=op)
    def QueryScale(x, position_ids):
        checked = guard(x, position_ids)  # position_ids must be [batch, seq] of x
        blocks = op.Div(op.Add(checked, op.Constant(value_int=offset)), op.Constant(value_int=floor_scale))
        one = op.Constant(value_float=1.0)
        s = op.Add(one, op.Mul(op.Constant(value_float=beta), op.Log(op.Add(one, op.Cast(blocks, to=FLOAT)))))
        s = op.Unsqueeze(s, op.Constant(value_ints=axes))
        if cast:
            y = op.Cast(op.Mul(op.Cast(x, to=FLOAT), s), to=out_type)
        else:
            y = op.Mul(x, s)
        return y

    return QueryScale


class QueryScaleEncoding(Encoding):
    name = "query-scale"
    family = "scale"
    Params = QueryScaleParams

    def inputs(self, p: QueryScaleParams) -> list[TensorSpec]:
        return [TensorSpec("x", x_shape(p, "batch", "seq")), TensorSpec("position_ids", ("batch", "seq"), is_float=False)]

    def reference(self, p: QueryScaleParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return reference(p, feeds)

    def torch_module(self, p: QueryScaleParams, opts: BuildOptions) -> torch.nn.Module:
        return QueryScaleModule(p)

    def tables(self, p: QueryScaleParams, opts: BuildOptions) -> Tables:
        return Tables({})

    def script_functions(self, p: QueryScaleParams, opts: BuildOptions, op: Any) -> list[Any]:
        guard = position_guard(shared_axes(self.inputs(p)), op)
        return [scale_function(p, opts.dtype, op, guard), guard]

    def feeds(self, p: QueryScaleParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        batch, seq = case.axes["batch"], case.axes["seq"]
        return {"x": random_normal(rng, x_shape(p, batch, seq), dtype), "position_ids": positions(rng, batch, seq, case)}

    def cases(self, p: QueryScaleParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        """The sequence sweep, and 17-token chunks across the first steps of the floor (F − offset ± 8)."""
        top = max(batches or (1, 3))
        steps = [Case(f"step@{k}F", {"batch": top, "seq": 17}, start=max(0, k * p.floor_scale - p.offset - 8))
                 for k in (1, 2, 1000) if k * p.floor_scale + 9 < SWEEP_LIMIT]
        return self.within_limits(p, sequence_cases(p.max_positions, SWEEP_LIMIT, seqs, batches) + steps, seqs, batches)

    def largest_position(self, p: QueryScaleParams, feeds: Mapping[str, np.ndarray]) -> int | None:
        return int(np.max(feeds["position_ids"]))


ENCODING = QueryScaleEncoding()
