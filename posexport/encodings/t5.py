"""T5 relative position bias, bucketed (docs/encodings.md): y = scores + bias.

    scores, y: [batch, heads, q_len, k_len]     query i sits at k_len − q_len + i, key j at j
    rp = key_pos − query_pos;  bias[h, i, j] = table[bucket(rp), h];  table: [num_buckets, heads]

Every |rp| ≥ max_distance lands in the last bucket of its direction, so the graph caches the bias per
relative position over rp ∈ [−max_distance, max_distance] (float64 buckets, cast once) and looks it up at
clamp(rp): exact for any q_len and k_len, without a table as long as the sequence.

    bias_by_rp: [2·max_distance + 1, heads]    row c holds the bias of rp = c − max_distance for every head
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from onnxscript import script

from .. import limits
from ..contract import BuildOptions, Property, Tables
from ..dtypes import COMPUTE
from ..params import check, check_seed, param
from ..script import POSEXPORT
from ..weights import load_table, pin_params
from . import properties as props
from .kinds.bias import OUTPUTS, AttentionBias, positions_function

DEFAULT_HEADS = 8
DEFAULT_BUCKETS = 32
INIT_STD = 1.0


@dataclass(frozen=True)
class T5Params:
    heads: int | None = param(None, f"attention heads (the table's columns); default {DEFAULT_HEADS}, or from --weights")
    num_buckets: int | None = param(None, f"relative-position buckets (the table's rows); default {DEFAULT_BUCKETS}, or from --weights")
    max_distance: int = param(128, "distance from which every relative position shares the last bucket")
    bidirectional: bool = param(True, "true: encoder, keys on both sides get buckets; false: decoder (causal)")
    weights: str | None = param(None, "trained bias table (num_buckets × heads): .npy, .safetensors or a torch state dict")
    key: str | None = param(None, "name of the table inside --weights, e.g. encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
    weights_sha256: str | None = param(None, "sha256 of --weights; recorded from the file, and checked when given")
    seed: int = param(0, f"seed of the N(0, {INIT_STD:g}) table used without --weights")
    output: str = param("scores", "scores: y = scores + bias; bias: only the bias [1, heads, q_len, k_len] of q/k positions", OUTPUTS)

    def __post_init__(self) -> None:
        check_seed(self)
        weighted = pin_params(self)
        if not weighted:
            for name, default in (("heads", DEFAULT_HEADS), ("num_buckets", DEFAULT_BUCKETS)):
                if getattr(self, name) is None:
                    object.__setattr__(self, name, default)
        self._check_shape()
        if weighted:
            rows, cols = trained_table(self.weights, self.key, self.weights_sha256, self.num_buckets, self.heads).shape
            object.__setattr__(self, "num_buckets", rows)
            object.__setattr__(self, "heads", cols)
            self._check_shape()  # the shape read from the file must pass the same checks
        limits.check_product([("num_buckets", self.num_buckets), ("heads", self.heads)], "the bias table")
        check(self.max_distance > self.num_buckets / 2, "max_distance", self.max_distance,
              f"must be more than num_buckets/2 = {self.num_buckets / 2:g} (the buckets below it are exact)")
        limits.check_tokens([("heads", self.heads)], "scores (one query-key pair each)")
        limits.check_bytes("max_distance", self.max_distance, (2 * self.max_distance + 1) * self.heads * limits.FLOAT64,
                           "the bias by relative position [2·max_distance + 1, heads]")
        check(self.output in OUTPUTS, "output", self.output, f"choose one of {', '.join(OUTPUTS)}")

    def _check_shape(self) -> None:
        """heads and num_buckets, where known (with --weights they may still come from the file)."""
        check(self.heads is None or (isinstance(self.heads, int) and self.heads >= 1), "heads", self.heads, "needs at least 1 head")
        if self.num_buckets is None:
            return
        if self.bidirectional:
            check(self.num_buckets >= 4 and self.num_buckets % 2 == 0, "num_buckets", self.num_buckets,
                  "bidirectional T5 needs an even number ≥ 4 (half the buckets for each direction)")
        else:
            check(self.num_buckets >= 2, "num_buckets", self.num_buckets, "needs at least 2 buckets")


@functools.lru_cache(maxsize=8)
def trained_table(path: str, key: str | None, digest: str, rows: int | None, cols: int | None) -> np.ndarray:
    """The float64 [num_buckets, heads] table of a weights file; cached per file content (digest)."""
    table = load_table(path, key, (rows, cols), what="T5 bias table [num_buckets, heads]")
    table.setflags(write=False)
    return table


# --- pure functions: buckets, tables, the float64 oracle -------------------------------------------


def relative_bucket(rp: np.ndarray, bidirectional: bool, num_buckets: int, max_distance: int) -> np.ndarray:
    """The T5 bucket of each relative position rp = key_pos − query_pos (int64 array)."""
    rp = np.asarray(rp, dtype=np.int64)
    if bidirectional:
        nb = num_buckets // 2
        bucket = np.where(rp > 0, nb, 0)
        n = np.abs(rp)
    else:
        nb = num_buckets
        bucket = np.zeros_like(rp)
        n = np.maximum(-rp, 0)
    max_exact = nb // 2
    # ⌊ln(n/max_exact) / ln(max_distance/max_exact) · (nb − max_exact)⌋, only used where n ≥ max_exact.
    far = np.log(np.maximum(n, max_exact) / max_exact) / math.log(max_distance / max_exact) * (nb - max_exact)
    large = np.minimum(max_exact + np.floor(far).astype(np.int64), nb - 1)
    return bucket + np.where(n < max_exact, n, large)


def build_t5_table(p: T5Params) -> np.ndarray:
    """The [num_buckets, heads] bias table in float64: trained or seeded."""
    if p.weights is not None:
        return trained_table(p.weights, p.key, p.weights_sha256, p.num_buckets, p.heads)
    return np.random.default_rng(p.seed).normal(0.0, INIT_STD, size=(p.num_buckets, p.heads))


def build_bias_by_rp(p: T5Params) -> np.ndarray:
    """[2·max_distance + 1, heads]: the bias of every relative position in [−max_distance, max_distance]."""
    return bias_by_rp_of(build_t5_table(p), p)


def bias_by_rp_of(table: np.ndarray, p: T5Params) -> np.ndarray:
    """The rows of ``table`` [num_buckets, heads] (in its own dtype) for rp = −max_distance … max_distance."""
    rp = np.arange(-p.max_distance, p.max_distance + 1)
    return np.asarray(table)[relative_bucket(rp, p.bidirectional, p.num_buckets, p.max_distance)]


def t5_bias_at(p: T5Params, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
    """table[bucket(rp), h] [heads, q_len, k_len] in float64, with the buckets of the full grid (no clamping)."""
    rp = np.asarray(k_positions)[None, :] - np.asarray(q_positions)[:, None]
    bucket = relative_bucket(rp, p.bidirectional, p.num_buckets, p.max_distance)  # [q, k]
    return np.moveaxis(build_t5_table(p)[bucket], -1, 0)


def reference(p: T5Params, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    """scores + the bias of queries that are the last q_len of the k_len keys."""
    scores = np.asarray(feeds["scores"]).astype(np.float64)
    q_len, k_len = scores.shape[-2:]
    return scores + t5_bias_at(p, np.arange(k_len - q_len, k_len), np.arange(k_len))


# --- torch ------------------------------------------------------------------------------------------


class T5Positions(torch.nn.Module):
    """Holds bias_by_rp as a buffer; forward(q_positions, k_positions) -> the float32 bias [heads, q, k]."""

    def __init__(self, p: T5Params):
        super().__init__()
        self.register_buffer("bias_by_rp", torch.from_numpy(build_bias_by_rp(p).astype(COMPUTE.numpy)), persistent=False)
        self.max_distance = p.max_distance

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        row = (k_positions[None, :] - q_positions[:, None]).clamp(-self.max_distance, self.max_distance) + self.max_distance
        return self.bias_by_rp[row].permute(2, 0, 1)  # [q, k, heads] -> [heads, q, k]


# --- onnxscript -------------------------------------------------------------------------------------


def t5_position_function(p: T5Params, op: Any) -> Any:
    """posexport.T5PositionBias(q_positions, k_positions, bias_by_rp) -> the float32 bias [1, heads, q, k]:
    row = clamp(k_pos − q_pos, ±md) + md over [q_len, k_len], one Gather of whole rows (all heads at once)
    into [1, q, k, heads] and one Transpose that writes the bias. (Gathering single floats along the heads
    axis instead was 2.2× slower on onnxruntime.)"""
    md = p.max_distance

    @script(POSEXPORT, default_opset=op)
    def T5PositionBias(q_positions, k_positions, bias_by_rp):
        rp = op.Sub(op.Unsqueeze(k_positions, op.Constant(value_ints=[0])), op.Unsqueeze(q_positions, op.Constant(value_ints=[1])))
        row = op.Add(op.Clip(rp, op.Constant(value_int=-md), op.Constant(value_int=md)), op.Constant(value_int=md))
        return op.Transpose(op.Gather(bias_by_rp, op.Unsqueeze(row, op.Constant(value_ints=[0])), axis=0), perm=[0, 3, 1, 2])

    return T5PositionBias


def t5_functions(p: T5Params, op: Any) -> list[Any]:
    """posexport.T5BiasTable(scores, bias_by_rp) -> the float32 bias [1, heads, q_len, k_len] of queries
    that are the last q_len of the k_len keys; the kind wraps it in the entry posexport.T5Bias(scores,
    bias_by_rp) -> y."""
    at_positions, positions_of = t5_position_function(p, op), positions_function(op)

    @script(POSEXPORT, default_opset=op)
    def T5BiasTable(scores, bias_by_rp):
        q_positions, k_positions = positions_of(scores)
        return at_positions(q_positions, k_positions, bias_by_rp)

    return [T5BiasTable, at_positions, positions_of]


# --- the encoding -----------------------------------------------------------------------------------


class T5Encoding(AttentionBias):
    name = "t5"
    entry = "T5Bias"
    Params = T5Params
    oracle = staticmethod(reference)

    def tables(self, p: T5Params, opts: BuildOptions) -> Tables:
        return Tables({"bias_by_rp": build_bias_by_rp(p).astype(COMPUTE.numpy)})

    def bias_functions(self, p: T5Params, op: Any) -> list[Any]:
        return t5_functions(p, op)

    def position_functions(self, p: T5Params, op: Any) -> list[Any]:
        return [t5_position_function(p, op)]

    def position_bias(self, p: T5Params, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
        return t5_bias_at(p, q_positions, k_positions)

    def position_module(self, p: T5Params) -> torch.nn.Module:
        return T5Positions(p)

    def decode_keys(self, p: T5Params) -> int:
        return max(5000, 4 * p.max_distance)

    def bias_properties(self, p: T5Params, bias: props.Bias) -> list[Property]:
        """Over every distance 0 … 2·max_distance + 15 on both sides, each bias is a row of the table, the
        row never goes back as |distance| grows, and distances ≥ max_distance share one."""
        return [props.monotone_buckets(bias, 2 * p.max_distance + 16, table=build_t5_table(p), constant_from=p.max_distance)]


ENCODING = T5Encoding()
