"""Rotary position embedding, plain and scaled (docs/encodings.md, RoPE).

A rotation (posexport.encodings.kinds.rotation: contract, channel layouts, properties) whose per-token
angles are p·θ_i, θ_i the inverse frequencies of its scaling (posexport.rope.scaling), with cos and sin
multiplied by the scaling's attention factor. Each scaling declares its graph-side cos/sin source
(posexport.rope.sources): two-level float64 tables (posexport.tables), so any position below the graph's
limit is exact and any other raises; longrope's short and long regimes stacked and picked per call from
max(position_ids) + 1; or dynamic NTK's angles formed in float64 inside the graph from that same length.
How the graph rotates is the backend's choice (posexport.rope.backends).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .. import limits, tables
from ..contract import BuildOptions, Case, Tables
from ..encodings.kinds.rotation import LAYOUTS, PAIR_LAYOUTS, ROPE_PAIR_LAYOUTS, Rotation, apply_rope, rotate_reference
from ..params import check, check_choices, param
from . import backends, scaling, sources

# Tests import the channel layouts and the rotation from here too.
__all__ = ["PAIR_LAYOUTS", "LAYOUTS", "RopeParams", "RopeEncoding", "ENCODING", "apply_rope", "inv_freq_and_factor", "reference"]

MIN_LIMIT = 1 << 17


@dataclass(frozen=True)
class RopeParams:
    head_dim: int = param(128, "channels per attention head (even)")
    heads: int = param(32, "attention heads")
    rotary_dim: int | None = param(None, "leading channels that rotate, even, ≤ head_dim (partial rotary); default head_dim")
    base: float = param(10000.0, "rope_theta, the frequency base (> 1)")
    pair_layout: str = param("half", "which channels pair up (deinterleave: reads interleaved pairs, writes them half-split, as DeepSeek-V3)", ROPE_PAIR_LAYOUTS)
    layout: str = param(
        "bshd", "axis order of x: [batch, seq, heads, dim], [batch, heads, seq, dim] or packed [batch, seq, heads·dim]", LAYOUTS)
    max_positions: int = param(4096, "positions the model was trained for (max_position_embeddings)")
    position_limit: int | None = param(
        None, "positions the graph covers exactly; beyond it the runtime raises; default max(131072, 2·max_positions)"
    )
    scaling: str = param("default", "frequency scaling (docs/encodings.md); each takes only its own options below", tuple(scaling.SCALINGS))
    factor: float | None = param(None, "scaling factor s (linear, ntk, dynamic, yarn, llama3)")
    original_max_positions: int | None = param(None, "L0, the pre-scaling context (yarn, llama3, longrope)")
    low_freq_factor: float | None = param(None, "llama3: wavelengths above L0/low_freq_factor are divided by s")
    high_freq_factor: float | None = param(None, "llama3: wavelengths below L0/high_freq_factor are kept")
    beta_fast: float | None = param(None, "yarn: rotations where interpolation starts (default 32)")
    beta_slow: float | None = param(None, "yarn: rotations where interpolation is complete (default 1)")
    mscale: float | None = param(None, "yarn: attention-factor numerator m")
    mscale_all_dim: float | None = param(None, "yarn: attention-factor denominator m")
    attention_factor: float | None = param(None, "multiplies cos and sin (yarn, longrope); default from the scaling")
    truncate: bool | None = param(None, "yarn: floor/ceil the correction range (default true)")
    short_factor: tuple[float, ...] = param((), "longrope: rotary_dim/2 factors used while seq_len ≤ L0")
    long_factor: tuple[float, ...] = param((), "longrope: rotary_dim/2 factors used once seq_len > L0")
    proportion: float | None = param(None, "proportional: the fraction of the rotary_dim/2 frequencies that turn (the model's partial_rotary_factor); the rest are 0")

    def __post_init__(self) -> None:
        check_choices(self)
        check(isinstance(self.head_dim, int) and self.head_dim > 0 and self.head_dim % 2 == 0,
              "head_dim", self.head_dim, "rope needs an even dimension ≥ 2")
        check(self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        if self.rotary_dim is None:
            object.__setattr__(self, "rotary_dim", self.head_dim)
        check(0 < self.rotary_dim <= self.head_dim and self.rotary_dim % 2 == 0,
              "rotary_dim", self.rotary_dim, f"must be even and in [2, head_dim={self.head_dim}]")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        check(self.pair_layout != "deinterleave" or self.rotary_dim == self.head_dim, "pair_layout", self.pair_layout,
              f"deinterleave rotates the whole head: rotary_dim {self.rotary_dim} must be head_dim {self.head_dim}")
        pin_position_limit(self)
        limits.check_tokens([("heads", self.heads), ("head_dim", self.head_dim)])
        limits.check_two_level("head_dim", self.head_dim, self.rotary_dim // 2, self.position_limit, regimes=2)
        scaling.validate(self)


def pin_position_limit(p: Any) -> None:
    """Check max_positions and fill in the default position_limit, max(131072, 2·max_positions) rounded
    up to a power of two, at most 2^31 (rope and M-RoPE params)."""
    check(1 <= p.max_positions <= 1 << 31, "max_positions", p.max_positions, "must be in [1, 2^31]")
    if p.position_limit is None:
        wanted = max(MIN_LIMIT, 2 * p.max_positions)
        object.__setattr__(p, "position_limit", min(1 << math.ceil(math.log2(wanted)), 1 << 31))
    check(p.max_positions <= p.position_limit <= 1 << 31, "position_limit", p.position_limit,
          f"must be in [max_positions={p.max_positions}, 2^31]")


# --- pure functions: frequencies and the float64 oracle -------------------------------------------


def inv_freq_and_factor(p: RopeParams, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """float64 inverse frequencies and attention factor; seq_len matters for dynamic and longrope only."""
    return scaling.frequencies(p, seq_len)


def run_length(position_ids: np.ndarray) -> int:
    """seq_len = max(position_ids) + 1 over the whole batch: what dynamic and longrope decide on."""
    return int(np.max(position_ids)) + 1


def reference_cos_sin(p: RopeParams, position_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos(p·θ_i)·a, sin(p·θ_i)·a [b, s, n] in float64, θ and a from the scaling at this call's length."""
    inv_freq, factor = inv_freq_and_factor(p, run_length(position_ids))
    theta = tables.angles(position_ids, inv_freq)
    return np.cos(theta) * factor, np.sin(theta) * factor


def reference(p: RopeParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    cos, sin = reference_cos_sin(p, np.asarray(feeds["position_ids"]))
    return rotate_reference(p, feeds["x"], cos, sin)


def switch_cases(p: RopeParams, batches: tuple[int, ...] | None = None) -> list[Case]:
    """Around a scaling's switch length L0: largest position L0 − 1, L0, L0 + 1 and 4·L0, each as a
    17-token prefill chunk and as a decode step (seq 1)."""
    original = scaling.switch_length(p)
    if original is None:
        return []
    batch = max(batches or (1, 3))
    out = []
    for last in (original - 1, original, original + 1, 4 * original):
        if 17 <= last < p.position_limit:
            out.append(Case(f"switch@{last}", {"batch": batch, "seq": 17}, start=last - 16))
        if 0 <= last < p.position_limit:
            out.append(Case(f"switch-decode@{last}", {"batch": batch, "seq": 1}, start=last))
    return out


# --- the encoding -----------------------------------------------------------------------------------


class RopeEncoding(Rotation):
    name = "rope"
    Params = RopeParams

    def reference_cos_sin(self, p: RopeParams, position_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return reference_cos_sin(p, position_ids)

    def cos_sin_module(self, p: RopeParams) -> torch.nn.Module:
        return sources.source_of(p).module(p)

    def tables(self, p: RopeParams, opts: BuildOptions) -> Tables:
        return Tables(sources.source_of(p).arrays(p))

    def cos_sin_function(self, p: RopeParams, op: Any) -> Any:
        return sources.source_of(p).function(p, op)

    def rotate_functions(self, p: RopeParams, opts: BuildOptions, op: Any) -> list[Any]:
        return backends.get_backend(opts.backend).rotation(p, opts.dtype.onnx, op)

    def steady_span(self, p: RopeParams) -> int:
        return scaling.steady_span(p)

    def attention_factor(self, p: RopeParams) -> float:
        return inv_freq_and_factor(p)[1]

    def extra_cases(self, p: RopeParams, batches: tuple[int, ...] | None) -> list[Case]:
        return switch_cases(p, batches)


ENCODING = RopeEncoding()
