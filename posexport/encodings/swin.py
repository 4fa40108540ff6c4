"""Swin window relative position bias (docs/encodings.md).

A window of Wh × Ww tokens (N = Wh·Ww, token t = (t // Ww, t % Ww)) learns one bias per head for each of the
(2Wh−1)(2Ww−1) relative offsets; tokens a = (ha, wa) and b = (hb, wb) use row

    index(a, b) = (ha − hb + Wh − 1)·(2Ww − 1) + (wa − wb + Ww − 1)

of the table [(2Wh−1)(2Ww−1), heads]. The gathered bias [heads, N, N] does not depend on the input, so it is
built once in float64 at build time and cast once; the graph is y = scores + bias, with scores
[batch·windows, heads, N, N] and a dynamic first axis. With ``--output bias`` the graph has no input and
one output, the bias [1, heads, N, N] in the I/O dtype, for an attention op's additive mask.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
from onnxscript import script

from .. import properties as props
from .. import weights as weights_mod
from ..dtypes import COMPUTE, DType
from .. import limits
from ..params import check, check_seed, param
from ..contract import BuildOptions, Case, Property, Runner, Tables, TensorSpec
from ..script import POSEXPORT
from .base import Assembled
from .inputs import random_normal
from .kinds.bias import OUTPUTS

MAX_WINDOW = 64
AXIS = "batch_windows"


@dataclass(frozen=True)
class SwinParams:
    window_h: int = param(7, "window rows (Wh)")
    window_w: int = param(7, "window columns (Ww)")
    heads: int = param(3, "attention heads")
    class_token: bool = param(False, "a class token before the window's tokens (BEiT): scores are [.., N+1, N+1] and the "
                                     "table ends with 3 rows: class→token, token→class, class→class")
    weights: str | None = param(None, "trained relative_position_bias_table [(2Wh−1)(2Ww−1), heads] (.npy, .safetensors, torch state dict)")
    key: str | None = param(None, "tensor name inside --weights (e.g. layers.0.blocks.0.attn.relative_position_bias_table)")
    seed: int = param(0, "seed of the N(0, 0.02) table used without --weights")
    weights_sha256: str | None = param(None, "sha256 of --weights, filled in at build; a file that changed since is an error")
    output: str = param("scores", "scores: y = scores + bias; bias: only the bias [1, heads, N, N] (a graph without inputs)", OUTPUTS)

    def __post_init__(self) -> None:
        check_seed(self)
        check(1 <= self.window_h <= MAX_WINDOW, "window_h", self.window_h, f"must be in [1, {MAX_WINDOW}]")
        check(1 <= self.window_w <= MAX_WINDOW, "window_w", self.window_w, f"must be in [1, {MAX_WINDOW}]")
        check(self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        check(self.seed >= 0, "seed", self.seed, "must be ≥ 0")
        limits.check_product([("heads", self.heads)], "the bias [heads, Wh·Ww, Wh·Ww]", itemsize=limits.FLOAT64 * self.tokens ** 2)
        check(self.output in OUTPUTS, "output", self.output, f"choose one of {', '.join(OUTPUTS)}")
        if weights_mod.pin_params(self):
            bias_table(self)  # shape errors surface here, naming --weights

    @property
    def tokens(self) -> int:
        return int(self.class_token) + self.window_h * self.window_w

    @property
    def table_rows(self) -> int:
        return (2 * self.window_h - 1) * (2 * self.window_w - 1) + 3 * int(self.class_token)


# --- pure functions ---------------------------------------------------------------------------------


def bias_table(p: SwinParams) -> np.ndarray:
    """[(2Wh−1)(2Ww−1), heads] in float64: from --weights, or seeded N(0, 0.02)."""
    if p.weights is None:
        return np.random.default_rng(p.seed).normal(0.0, 0.02, (p.table_rows, p.heads))
    return _load(p.weights, p.key, p.weights_sha256, p.table_rows, p.heads)


@functools.lru_cache(maxsize=8)
def _load(path: str, key: str | None, digest: str | None, rows: int, heads: int) -> np.ndarray:
    array = weights_mod.load_table(path, key, (rows, heads), what="relative position bias table")
    array.flags.writeable = False
    return array


def relative_index(window_h: int, window_w: int, class_token: bool = False) -> np.ndarray:
    """[N, N] table row for every token pair, from the formula in docs/encodings.md; with a class token
    [N+1, N+1], its row and column reading the table's last three rows (BEiT's layout)."""
    t = np.arange(window_h * window_w)
    h, w = t // window_w, t % window_w
    index = (h[:, None] - h[None, :] + window_h - 1) * (2 * window_w - 1) + (w[:, None] - w[None, :] + window_w - 1)
    if not class_token:
        return index
    last = (2 * window_h - 1) * (2 * window_w - 1) + 3
    out = np.pad(index, ((1, 0), (1, 0)))
    out[0, :], out[:, 0], out[0, 0] = last - 3, last - 2, last - 1  # class→token, token→class, class→class
    return out


def build_bias(p: SwinParams) -> np.ndarray:
    """bias [heads, N, N] = table[index(a, b), head], float64."""
    return np.moveaxis(bias_table(p)[relative_index(p.window_h, p.window_w, p.class_token)], -1, 0)


def reference(p: SwinParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    if p.output == "bias":
        return build_bias(p)[None]
    return np.asarray(feeds["scores"]).astype(np.float64) + build_bias(p)[None]


# --- torch ------------------------------------------------------------------------------------------


class SwinRelativeBias(torch.nn.Module):
    def __init__(self, p: SwinParams):
        super().__init__()
        self.register_buffer("bias", torch.from_numpy(build_bias(p).astype(COMPUTE.numpy)), persistent=False)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return (scores.to(torch.float32) + self.bias).to(scores.dtype)


class SwinBiasOnly(torch.nn.Module):
    """forward() -> the bias [1, heads, N, N] in the I/O dtype."""

    def __init__(self, p: SwinParams, dtype: torch.dtype):
        super().__init__()
        self.register_buffer("bias", torch.from_numpy(build_bias(p)[None].astype(COMPUTE.numpy)), persistent=False)
        self.dtype = dtype

    def forward(self) -> torch.Tensor:
        return self.bias.to(self.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def swin_functions(io: DType, op: Any, bias_only: bool = False) -> list[Any]:
    float32, out_type = onnx.TensorProto.FLOAT, io.onnx
    if bias_only:

        @script(POSEXPORT, default_opset=op)
        def SwinBiasOnly(window_bias):
            return op.Cast(window_bias, to=out_type)  # onnxruntime writes the output once, whatever the dtype

        return [SwinBiasOnly]

    @script(POSEXPORT, default_opset=op)
    def SwinBias(scores, bias):
        return op.Cast(op.Add(op.Cast(scores, to=float32), bias), to=out_type)

    return [SwinBias]


# --- properties -------------------------------------------------------------------------------------


def observed_bias(p: SwinParams) -> props.Pairwise:
    """The bias read off the runtime (y − scores) for every token pair, with the pair's table row as its
    offset: [N, N, 2, heads]."""

    def pairwise(run: Runner, dtype: DType, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
        if p.output == "bias":
            scores = np.zeros((1, p.heads, p.tokens, p.tokens))
            y = np.asarray(run({})).astype(np.float64)
        else:
            scores = random_normal(rng, (2, p.heads, p.tokens, p.tokens), dtype)
            y = np.asarray(run({"scores": scores})).astype(np.float64)
        bias = np.moveaxis(y - scores.astype(np.float64), (2, 3), (0, 1))
        return bias, relative_index(p.window_h, p.window_w, p.class_token), max(1.0, float(np.max(np.abs(y))))

    return pairwise


# --- the encoding -----------------------------------------------------------------------------------


class SwinEncoding(Assembled):
    name = "swin"
    family = "vision"
    Params = SwinParams
    oracle = staticmethod(reference)
    Module = SwinRelativeBias

    def inputs(self, p: SwinParams) -> list[TensorSpec]:
        if p.output == "bias":
            return []
        return [TensorSpec("scores", (AXIS, p.heads, p.tokens, p.tokens))]

    def outputs(self, p: SwinParams) -> list[TensorSpec]:
        if p.output == "bias":
            return [TensorSpec("bias", (1, p.heads, p.tokens, p.tokens))]
        return super().outputs(p)

    def torch_module(self, p: SwinParams, opts: BuildOptions) -> torch.nn.Module:
        if p.output == "bias":
            return SwinBiasOnly(p, opts.dtype.torch)
        return super().torch_module(p, opts)

    def tables(self, p: SwinParams, opts: BuildOptions) -> Tables:
        # Bias only: the graph's output is named bias, so its table is window_bias [1, heads, N, N].
        if p.output == "bias":
            return Tables({"window_bias": build_bias(p)[None].astype(COMPUTE.numpy)})
        return Tables({"bias": build_bias(p).astype(COMPUTE.numpy)})

    def script_functions(self, p: SwinParams, opts: BuildOptions, op: Any) -> list[Any]:
        return swin_functions(opts.dtype, op, bias_only=p.output == "bias")

    def feeds(self, p: SwinParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if p.output == "bias":
            return {}
        return {"scores": random_normal(rng, (case.axes[AXIS], p.heads, p.tokens, p.tokens), dtype)}

    def cases(self, p: SwinParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        if p.output == "bias":
            return [Case("bias", {})]
        # 64 windows: a 56×56 stage-1 map of 7×7 windows; ×3 for a batch of 3.
        sizes = seqs or (1, 4, 64, 192)
        return self.within_limits(p, [Case(f"{AXIS}{n}", {AXIS: n}) for n in sizes], seqs, batches)

    def example_axes(self, p: SwinParams) -> dict[str, int] | None:
        size = next(s for s in (5, 7, 9, 11, 13) if s not in (p.heads, p.tokens))
        return {AXIS: size}

    def properties(self, p: SwinParams) -> list[Property]:
        return [props.relative_2d(observed_bias(p), "the bias", bound_factor=2.0)]


ENCODING = SwinEncoding()
