"""Swin window relative position bias (docs/encodings.md).

A window of Wh × Ww tokens (N = Wh·Ww, token t = (t // Ww, t % Ww)) learns one bias per head for each of the
(2Wh−1)(2Ww−1) relative offsets; tokens a = (ha, wa) and b = (hb, wb) use row

    index(a, b) = (ha − hb + Wh − 1)·(2Ww − 1) + (wa − wb + Ww − 1)

of the table [(2Wh−1)(2Ww−1), heads]. With ``--table-source mlp`` (Swin-V2's continuous position bias) the table
is not stored but computed from a small MLP: row (Δh, Δw) is 16·sigmoid(MLP(c)), c the offset's log-spaced
coordinates (log_spaced_offsets). Either way the gathered bias [heads, N, N] does not depend on the input, so it is
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

from .. import weights as weights_mod
from .. import limits
from ..contract import BuildOptions, Case, Property, Runner, Tables, TensorSpec
from ..dtypes import COMPUTE, DType
from ..params import check, check_seed, param
from ..script import POSEXPORT
from . import properties as props
from .base import Assembled
from .inputs import random_normal
from .kinds.bias import OUTPUTS

MAX_WINDOW = 64
AXIS = "batch_windows"
TABLE_SOURCES = ("table", "mlp")
# Swin-V2's continuous_position_bias_mlp: Linear(2, 512, bias) → ReLU → Linear(512, heads, no bias); offsets
# scaled to ±8 and log-spaced by log2(|x| + 1) / log2(8); its output squashed to (0, 16) by 16·sigmoid.
MLP_HIDDEN = 512
OFFSET_RANGE = 8.0
BIAS_RANGE = 16.0


@dataclass(frozen=True)
class SwinParams:
    window_h: int = param(7, "window rows (Wh)")
    window_w: int = param(7, "window columns (Ww)")
    heads: int = param(3, "attention heads")
    class_token: bool = param(False, "a class token before the window's tokens (BEiT): scores are [.., N+1, N+1] and the "
                                     "table ends with 3 rows: class→token, token→class, class→class")
    table_source: str = param("table", "table: a trained relative_position_bias_table; mlp: Swin-V2's continuous position "
                                       "bias, row (Δh, Δw) = 16·sigmoid(MLP(log-spaced Δh, Δw)), the MLP Linear(2, 512) → "
                                       "ReLU → Linear(512, heads, no bias)", TABLE_SOURCES)
    pretrained_window: int = param(0, "--table-source mlp: offsets are divided by pretrained_window − 1 (Swin-V2's "
                                      "pretrained_window_sizes); 0: each by its own window side − 1")
    weights: str | None = param(None, "trained relative_position_bias_table [(2Wh−1)(2Ww−1), heads] (.npy, .safetensors, torch "
                                      "state dict); --table-source mlp: the MLP's tensors (.safetensors, torch state dict)")
    key: str | None = param(None, "tensor name inside --weights (e.g. layers.0.blocks.0.attn.relative_position_bias_table); "
                                  "--table-source mlp: the MLP's name, its tensors <key>.0.weight, <key>.0.bias, <key>.2.weight")
    seed: int = param(0, "seed of the N(0, 0.02) table used without --weights (mlp: N(0, 1) first layer, N(0, 1/512) second)")
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
        check(self.table_source in TABLE_SOURCES, "table_source", self.table_source, f"choose one of {', '.join(TABLE_SOURCES)}")
        mlp = self.table_source == "mlp"
        check(self.pretrained_window == 0 or mlp, "pretrained_window", self.pretrained_window, "only means something with --table-source mlp")
        check(self.pretrained_window == 0 or 2 <= self.pretrained_window <= MAX_WINDOW, "pretrained_window", self.pretrained_window,
              f"must be 0 (the window itself) or in [2, {MAX_WINDOW}]: offsets are divided by pretrained_window − 1")
        check(not (mlp and self.class_token), "class_token", self.class_token, "has no row in Swin-V2's continuous bias (--table-source mlp)")
        check(not (mlp and self.weights is not None and self.key is None), "key", self.key,
              "--table-source mlp needs the MLP's name in --weights (e.g. …attention.self.continuous_position_bias_mlp)")
        check(not (mlp and self.weights is not None and self.weights.lower().endswith(".npy")), "weights", self.weights,
              "an .npy holds one array; the MLP's three tensors need a .safetensors file or a torch state dict")
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
    """[(2Wh−1)(2Ww−1), heads] in float64: from --weights, or seeded N(0, 0.02); or (mlp) computed by the MLP."""
    if p.table_source == "mlp":
        return continuous_table(p)
    if p.weights is None:
        return np.random.default_rng(p.seed).normal(0.0, 0.02, (p.table_rows, p.heads))
    return _load(p.weights, p.key, p.weights_sha256, (p.table_rows, p.heads), "relative position bias table")


@functools.lru_cache(maxsize=8)
def _load(path: str, key: str | None, digest: str | None, shape: tuple[int, ...], what: str) -> np.ndarray:
    array = weights_mod.load_table(path, key, shape, what=what)
    array.flags.writeable = False
    return array


def log_spaced_offsets(window_h: int, window_w: int, pretrained_window: int = 0) -> np.ndarray:
    """[(2Wh−1)(2Ww−1), 2]: each table row's offset (Δh, Δw), in row order, divided by (pretrained_window, else
    its own window side) − 1, scaled to ±8 and log-spaced: sign(x)·log2(|x| + 1) / log2(8) (Swin-V2's
    relative_coords_table)."""
    dh, dw = np.meshgrid(np.arange(1 - window_h, window_h), np.arange(1 - window_w, window_w), indexing="ij")
    sides = np.array([pretrained_window or window_h, pretrained_window or window_w], dtype=np.float64) - 1
    x = OFFSET_RANGE * np.stack([dh, dw], axis=-1).reshape(-1, 2) / np.maximum(sides, 1)  # a one-token side has only Δ = 0
    return np.sign(x) * np.log2(np.abs(x) + 1) / np.log2(OFFSET_RANGE)


def mlp_weights(p: SwinParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The MLP's first weight [512, 2], first bias [512] and second weight [heads, 512], float64: from --weights
    (<key>.0.weight, <key>.0.bias, <key>.2.weight), or seeded so the bias spans the sigmoid's range."""
    if p.weights is None:
        rng = np.random.default_rng(p.seed)
        return (rng.normal(0.0, 1.0, (MLP_HIDDEN, 2)), rng.normal(0.0, 1.0, MLP_HIDDEN),
                rng.normal(0.0, MLP_HIDDEN**-0.5, (p.heads, MLP_HIDDEN)))
    shapes = {"0.weight": (MLP_HIDDEN, 2), "0.bias": (MLP_HIDDEN,), "2.weight": (p.heads, MLP_HIDDEN)}
    first, bias, second = (_load(p.weights, f"{p.key}.{name}", p.weights_sha256, shape, f"continuous bias MLP {name}")
                           for name, shape in shapes.items())
    return first, bias, second


def continuous_table(p: SwinParams) -> np.ndarray:
    """[(2Wh−1)(2Ww−1), heads] = 16·sigmoid(ReLU(c·W1ᵀ + b1)·W2ᵀ), c the log-spaced offsets, in float64."""
    first, bias, second = mlp_weights(p)
    logits = np.maximum(log_spaced_offsets(p.window_h, p.window_w, p.pretrained_window) @ first.T + bias, 0.0) @ second.T
    return BIAS_RANGE * np.exp(-np.logaddexp(0.0, -logits))  # sigmoid without overflow


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
