"""ALiBi attention bias (DESIGN 3.4): y = scores + bias, no learned parameters.

    scores, y: [batch, heads, q_len, k_len]     query i sits at q_i = k_len − q_len + i, key j at j
    causal:    bias[h, i, j] = −slope_h·(q_i − j) for j ≤ q_i, −inf above the diagonal (j > q_i)
    symmetric: bias[h, i, j] = −slope_h·|q_i − j|

Slopes for n heads: 2^(−8k/n), k = 1 … n, when n is a power of two; otherwise, with m = 2^⌊log2 n⌋, the
m slopes of m heads followed by every other slope of 2m heads, n − m of them.

The graph keeps only the slopes [heads, 1, 1]; the bias is broadcast from a [q_len, k_len] distance made
of two aranges, so a decode step (q_len 1) touches a [heads, 1, k_len] row, never a [heads, k_len, k_len]
table. In the causal case the mask rides on the distance (+inf above the diagonal, times −slope = −inf),
so the per-head bias is written once.
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

from ..dtypes import COMPUTE, DType
from ..params import check, param
from ..contract import BuildOptions, Case, Property, PropertyResult, Runner, Tables, TensorSpec
from ..script import POSEXPORT
from .base import Encoding
from .inputs import attention_cases, random_normal


@dataclass(frozen=True)
class AlibiParams:
    heads: int = param(8, "attention heads (any number ≥ 1; powers of two and not)")
    causal: bool = param(True, "true: decoder, −inf above the diagonal; false: symmetric −slope·|distance| (encoders)")

    def __post_init__(self) -> None:
        check(isinstance(self.heads, int) and self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        check(isinstance(self.causal, bool), "causal", self.causal, "true or false")


# --- pure functions: slopes and the float64 oracle -------------------------------------------------


def alibi_slopes(heads: int) -> np.ndarray:
    """DESIGN 3.4's slope of each head, float64."""

    def power_of_two(n: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)

    m = 1 << (heads.bit_length() - 1)  # 2^⌊log2 heads⌋
    if m == heads:
        return power_of_two(heads)
    return np.concatenate([power_of_two(m), power_of_two(2 * m)[0::2][: heads - m]])


def build_alibi_bias(heads: int, causal: bool, q_len: int, k_len: int) -> np.ndarray:
    """[heads, q_len, k_len] float64 bias, queries being the last q_len of the k_len keys."""
    distance = np.arange(k_len - q_len, k_len)[:, None] - np.arange(k_len)[None, :]  # q_i − k_j
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


class AlibiBias(torch.nn.Module):
    """Holds −slopes [heads, 1, 1]; forward(scores) -> scores + bias, the bias broadcast from aranges."""

    def __init__(self, p: AlibiParams):
        super().__init__()
        self.register_buffer("neg_slopes", torch.from_numpy(-alibi_slopes(p.heads)[:, None, None].astype(COMPUTE.numpy)), persistent=False)
        self.causal = p.causal

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        q_len, k_len = scores.shape[-2], scores.shape[-1]
        q_pos = torch.arange(k_len - q_len, k_len, device=scores.device)
        k_pos = torch.arange(k_len, device=scores.device)
        distance = q_pos[:, None] - k_pos[None, :]  # [q, k]
        if self.causal:
            far = torch.full((), math.inf, dtype=torch.float32, device=scores.device)
            distance = torch.where(distance < 0, far, distance.to(torch.float32))
        else:
            distance = distance.abs().to(torch.float32)
        return (scores.to(torch.float32) + self.neg_slopes * distance).to(scores.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def alibi_functions(p: AlibiParams, io: DType, op: Any) -> list[Any]:
    """posexport.Alibi(scores, neg_slopes) -> y, and the bias function it calls."""
    float32 = onnx.TensorProto.FLOAT
    out_type = io.onnx

    @script(POSEXPORT, default_opset=op)
    def AlibiDistance(scores):
        """q_pos − k_pos over [q_len, k_len], int64."""
        q_len = op.Squeeze(op.Shape(scores, start=2, end=3))
        k_len = op.Squeeze(op.Shape(scores, start=3, end=4))
        one = op.Constant(value_int=1)
        q_pos = op.Range(op.Sub(k_len, q_len), k_len, one)
        k_pos = op.Range(op.Constant(value_int=0), k_len, one)
        return op.Sub(op.Unsqueeze(q_pos, op.Constant(value_ints=[1])), op.Unsqueeze(k_pos, op.Constant(value_ints=[0])))

    if p.causal:

        @script(POSEXPORT, default_opset=op)
        def AlibiBias(scores, neg_slopes):
            distance = AlibiDistance(scores)
            # Keys after the query get distance +inf, so −slope·distance is −inf there: the mask is free.
            above = op.Less(distance, op.Constant(value_int=0))
            masked = op.Where(above, op.Constant(value_float=math.inf), op.Cast(distance, to=float32))
            return op.Mul(neg_slopes, masked)  # [heads, q, k], float32

    else:

        @script(POSEXPORT, default_opset=op)
        def AlibiBias(scores, neg_slopes):
            return op.Mul(neg_slopes, op.Cast(op.Abs(AlibiDistance(scores)), to=float32))  # [heads, q, k], float32

    # float32 I/O adds directly: a Cast to the same type would cost onnxruntime a full copy.
    if out_type == float32:

        @script(POSEXPORT, default_opset=op)
        def Alibi(scores, neg_slopes):
            return op.Add(scores, AlibiBias(scores, neg_slopes))

    else:

        @script(POSEXPORT, default_opset=op)
        def Alibi(scores, neg_slopes):
            return op.Cast(op.Add(op.Cast(scores, to=float32), AlibiBias(scores, neg_slopes)), to=out_type)

    return [Alibi, AlibiDistance, AlibiBias]  # after the entry, callees before their callers


# --- properties on the built graph ----------------------------------------------------------------


def observed_bias(runner: Runner, p: AlibiParams, dtype: DType, rng: np.random.Generator, q_len: int, k_len: int) -> np.ndarray:
    """The bias the graph adds, y − scores for small random scores: [heads, q_len, k_len], float64."""
    scores = (random_normal(rng, (1, p.heads, q_len, k_len), dtype).astype(np.float64) * 1e-3).astype(dtype.numpy)
    y = np.asarray(runner({"scores": scores})).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (y - scores.astype(np.float64))[0]


def distances(q_len: int, k_len: int) -> np.ndarray:
    return np.arange(k_len - q_len, k_len)[:, None] - np.arange(k_len)[None, :]


def check_linear(runner: Runner, p: AlibiParams, dtype: DType, rng: np.random.Generator) -> PropertyResult:
    """Per head, the unmasked bias is c_h·|distance| for one constant c_h < 0 (a least-squares fit through
    the origin), on a square prefill and on a decode row far out."""
    worst, slopes_seen = 0.0, []
    for q_len, k_len in ((64, 64), (1, 5000)):
        bias = observed_bias(runner, p, dtype, rng, q_len, k_len)
        dist = np.abs(distances(q_len, k_len)).astype(np.float64)
        keep = np.broadcast_to(distances(q_len, k_len) >= 0 if p.causal else np.ones_like(dist, bool), dist.shape)
        d = dist[keep]
        for h in range(p.heads):
            b = bias[h][keep]
            if not np.all(np.isfinite(b)):
                return PropertyResult(False, f"head {h}: a non-finite bias below the diagonal (q_len {q_len}, k_len {k_len})", math.inf)
            c = float(d @ b / (d @ d)) if d @ d else 0.0
            worst = max(worst, float(np.max(np.abs(b - c * d))) / max(1.0, float(np.max(np.abs(b)))))
            slopes_seen.append(c)
    negative = all(c < 0 for c in slopes_seen) or not any(slopes_seen)
    tol = 2 * dtype.bound()
    ok = worst <= tol and negative
    detail = f"bias = c_h·|distance| per head, worst residual {worst:.2e} (bound {tol:.1e})" + ("" if negative else "; a slope is not negative")
    return PropertyResult(ok, detail, worst)


def check_mask(runner: Runner, p: AlibiParams, dtype: DType, rng: np.random.Generator) -> PropertyResult:
    """Causal: exactly −inf above the diagonal and finite on and below it; symmetric: finite everywhere."""
    bad = 0
    for q_len, k_len in ((64, 64), (7, 40), (1, 300)):
        bias = observed_bias(runner, p, dtype, rng, q_len, k_len)
        above = np.broadcast_to(distances(q_len, k_len) < 0, bias.shape) if p.causal else np.zeros(bias.shape, bool)
        bad += int(np.sum(above & ~np.isneginf(bias)) + np.sum(~above & ~np.isfinite(bias)))
    what = "−inf exactly above the diagonal, finite elsewhere" if p.causal else "finite everywhere (no mask)"
    return PropertyResult(bad == 0, f"{what}: {bad} entries differ", float(bad))


PROPERTIES = [
    Property("linear-in-distance", "each head's bias is one negative constant times the query–key distance", check_linear),
    Property("causal-mask", "causal: −inf exactly above the diagonal; symmetric: no mask", check_mask),
]


# --- the encoding -----------------------------------------------------------------------------------


class AlibiEncoding(Encoding):
    name = "alibi"
    family = "attention-bias"
    Params = AlibiParams

    def inputs(self, p: AlibiParams) -> list[TensorSpec]:
        return [TensorSpec("scores", ("batch", p.heads, "q_len", "k_len"))]

    def reference(self, p: AlibiParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return reference(p, feeds)

    def torch_module(self, p: AlibiParams, opts: BuildOptions) -> torch.nn.Module:
        return AlibiBias(p)

    def tables(self, p: AlibiParams, opts: BuildOptions) -> Tables:
        return Tables({"neg_slopes": -alibi_slopes(p.heads)[:, None, None].astype(COMPUTE.numpy)})

    def script_functions(self, p: AlibiParams, opts: BuildOptions, op: Any) -> list[Any]:
        return alibi_functions(p, opts.dtype, op)

    def feeds(self, p: AlibiParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        a = case.axes
        return {"scores": random_normal(rng, (a["batch"], p.heads, a["q_len"], a["k_len"]), dtype)}

    def cases(self, p: AlibiParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return attention_cases(seqs, batches)

    def example_axes(self, p: AlibiParams) -> dict[str, int]:
        # k_len > q_len, as in a prefill chunk after a cache: the export must not tie the two axes.
        return {"batch": 2, "q_len": 3, "k_len": 7}

    def properties(self, p: AlibiParams) -> list[Property]:
        return PROPERTIES


ENCODING = AlibiEncoding()
