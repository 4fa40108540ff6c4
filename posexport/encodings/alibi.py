"""ALiBi attention bias (docs/encodings.md): y = scores + bias, no learned parameters.

    scores, y: [batch, heads, q_len, k_len]     query i sits at q_i = k_len − q_len + i, key j at j
    causal:    bias[h, i, j] = −slope_h·(q_i − j) for j ≤ q_i, −inf above the diagonal (j > q_i)
    symmetric: bias[h, i, j] = −slope_h·|q_i − j|

Slopes for n heads: 2^(−8k/n), k = 1 … n, when n is a power of two; otherwise, with m = 2^⌊log2 n⌋, the
m slopes of m heads followed by every other slope of 2m heads, n − m of them.

The graph keeps only the slopes [heads, 1, 1] ([1, heads, 1, 1] with ``--output bias``); the bias is
broadcast from a [q_len, k_len] distance of the query and key positions (two aranges, or the graph's
q_positions and k_positions), so a decode step (q_len 1) touches a [heads, 1, k_len] row, never a
[heads, k_len, k_len] table. In the causal case the mask rides on the distance (+inf above the diagonal,
times −slope = −inf), so the per-head bias is written once.
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

from .. import limits
from ..contract import BuildOptions, Property, Tables
from ..dtypes import COMPUTE
from ..params import check, param
from ..script import POSEXPORT
from . import properties as props
from .kinds.bias import OUTPUTS, AttentionBias, positions_function


@dataclass(frozen=True)
class AlibiParams:
    heads: int = param(8, "attention heads (any number ≥ 1; powers of two and not)")
    causal: bool = param(True, "true: decoder, −inf above the diagonal; false: symmetric −slope·|distance| (encoders)")
    output: str = param("scores", "scores: y = scores + bias; bias: only the bias [1, heads, q_len, k_len] of q/k positions", OUTPUTS)

    def __post_init__(self) -> None:
        check(isinstance(self.heads, int) and self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        check(isinstance(self.causal, bool), "causal", self.causal, "true or false")
        limits.check_tokens([("heads", self.heads)], "scores (one query-key pair each)")
        check(self.output in OUTPUTS, "output", self.output, f"choose one of {', '.join(OUTPUTS)}")


# --- pure functions: slopes and the float64 oracle -------------------------------------------------


def alibi_slopes(heads: int) -> np.ndarray:
    """The slope of each head (the module docstring's rule), float64."""

    def power_of_two(n: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)

    m = 1 << (heads.bit_length() - 1)  # 2^⌊log2 heads⌋
    if m == heads:
        return power_of_two(heads)
    return np.concatenate([power_of_two(m), power_of_two(2 * m)[0::2][: heads - m]])


def build_alibi_bias(heads: int, causal: bool, q_len: int, k_len: int) -> np.ndarray:
    """[heads, q_len, k_len] float64 bias, queries being the last q_len of the k_len keys."""
    return alibi_bias_at(heads, causal, np.arange(k_len - q_len, k_len), np.arange(k_len))


def alibi_bias_at(heads: int, causal: bool, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """[heads, q_len, k_len] float64 bias of queries and keys at these positions."""
    distance = np.asarray(q_positions)[:, None] - np.asarray(k_positions)[None, :]  # q_i − k_j
    slopes = alibi_slopes(heads)[:, None, None]
    if not causal:
        return -slopes * np.abs(distance)
    with np.errstate(invalid="ignore"):
        return np.where(distance[None] < 0, -np.inf, -slopes * distance)


def reference(p: AlibiParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    scores = np.asarray(feeds["scores"]).astype(np.float64)
    q_len, k_len = scores.shape[-2:]
    return scores + build_alibi_bias(p.heads, p.causal, q_len, k_len)


# --- torch ------------------------------------------------------------------------------------------


class AlibiPositions(torch.nn.Module):
    """Holds −slopes [heads, 1, 1]; forward(q_positions, k_positions) -> the float32 bias [heads, q, k]."""

    def __init__(self, p: AlibiParams):
        super().__init__()
        self.register_buffer("neg_slopes", torch.from_numpy(-alibi_slopes(p.heads)[:, None, None].astype(COMPUTE.numpy)), persistent=False)
        self.causal = p.causal

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        distance = q_positions[:, None] - k_positions[None, :]  # [q, k]
        if self.causal:
            far = torch.full((), math.inf, dtype=torch.float32, device=distance.device)
            distance = torch.where(distance < 0, far, distance.to(torch.float32))
        else:
            distance = distance.abs().to(torch.float32)
        return self.neg_slopes * distance


# --- onnxscript -------------------------------------------------------------------------------------


def alibi_position_function(p: AlibiParams, op: Any) -> Any:
    """posexport.AlibiPositionBias(q_positions, k_positions, neg_slopes) -> the float32 bias, [heads, q, k]
    or [1, heads, q, k] as neg_slopes is [heads, 1, 1] or [1, heads, 1, 1]: one [q, k] distance (int64,
    then float32: exact whatever the positions), one Mul that writes the bias."""
    float32 = onnx.TensorProto.FLOAT

    if p.causal:

        @script(POSEXPORT, default_opset=op)
        def AlibiPositionBias(q_positions, k_positions, neg_slopes):
            distance = op.Sub(op.Unsqueeze(q_positions, op.Constant(value_ints=[1])), op.Unsqueeze(k_positions, op.Constant(value_ints=[0])))
            # Keys after the query get distance +inf, so −slope·distance is −inf there: the mask is free.
            above = op.Less(distance, op.Constant(value_int=0))
            masked = op.Where(above, op.Constant(value_float=math.inf), op.Cast(distance, to=float32))
            return op.Mul(neg_slopes, masked)

    else:

        @script(POSEXPORT, default_opset=op)
        def AlibiPositionBias(q_positions, k_positions, neg_slopes):
            distance = op.Sub(op.Unsqueeze(q_positions, op.Constant(value_ints=[1])), op.Unsqueeze(k_positions, op.Constant(value_ints=[0])))
            return op.Mul(neg_slopes, op.Cast(op.Abs(distance), to=float32))

    return AlibiPositionBias


def alibi_functions(p: AlibiParams, op: Any) -> list[Any]:
    """posexport.AlibiBias(scores, neg_slopes) -> the float32 bias [heads, q_len, k_len] of queries that are
    the last q_len of the k_len keys, and what it calls; the kind wraps them in the entry
    posexport.Alibi(scores, neg_slopes) -> y."""
    at_positions, positions_of = alibi_position_function(p, op), positions_function(op)

    @script(POSEXPORT, default_opset=op)
    def AlibiBias(scores, neg_slopes):
        q_positions, k_positions = positions_of(scores)
        return at_positions(q_positions, k_positions, neg_slopes)

    return [AlibiBias, at_positions, positions_of]  # the float32 core first, then what it calls


# --- the encoding -----------------------------------------------------------------------------------


class AlibiEncoding(AttentionBias):
    name = "alibi"
    entry = "Alibi"
    Params = AlibiParams
    oracle = staticmethod(reference)

    def tables(self, p: AlibiParams, opts: BuildOptions) -> Tables:
        # Bias only: [1, heads, 1, 1], so that the Mul writes the [1, heads, q, k] output itself.
        shape = (1, p.heads, 1, 1) if p.output == "bias" else (p.heads, 1, 1)
        return Tables({"neg_slopes": -alibi_slopes(p.heads).reshape(shape).astype(COMPUTE.numpy)})

    def bias_functions(self, p: AlibiParams, op: Any) -> list[Any]:
        return alibi_functions(p, op)

    def position_functions(self, p: AlibiParams, op: Any) -> list[Any]:
        return [alibi_position_function(p, op)]

    def position_bias(self, p: AlibiParams, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
        return alibi_bias_at(p.heads, p.causal, q_positions, k_positions)

    def position_module(self, p: AlibiParams) -> torch.nn.Module:
        return AlibiPositions(p)

    def bias_properties(self, p: AlibiParams, bias: props.Bias) -> list[Property]:
        """Each head's bias is one negative constant times the distance, on a prefill chunk after a cache;
        causal graphs are −inf exactly above the diagonal."""
        linear = props.linear_in_distance(bias, 64, 300, symmetric=not p.causal, negative=True)
        return [linear, props.masked_above_diagonal(bias, 64, 300)] if p.causal else [linear]


ENCODING = AlibiEncoding()
