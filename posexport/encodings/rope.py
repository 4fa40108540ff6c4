"""Rotary position embedding (DESIGN 3.5), plain and scaled.

Channel layouts of the rotated part (d = rotary_dim, n = d/2 frequencies):

    half:        x: [a0 a1 … a(n−1) | b0 b1 … b(n−1)]    a_i pairs with b_i   (GPT-NeoX, LLaMA)
    interleaved: x: [a0 b0 a1 b1 … a(n−1) b(n−1)]        a_i pairs with b_i   (GPT-J, original)

    y_a = a·cos(p·θ_i) − b·sin(p·θ_i),  y_b = b·cos(p·θ_i) + a·sin(p·θ_i)

Channels past rotary_dim pass through unchanged. cos and sin come from two-level float64 tables
(posexport.tables), so any position below the graph's limit is exact and any other raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from onnxscript import script

from .. import backends, scaling, tables
from ..dtypes import COMPUTE, DType
from ..params import check, check_choices, param
from .base import POSEXPORT, BuildOptions, Case, Encoding, Tables, TensorSpec
from .inputs import positions, random_normal, sequence_cases

PAIR_LAYOUTS = ("half", "interleaved")
LAYOUTS = ("bshd", "bhsd")
MIN_LIMIT = 1 << 17


@dataclass(frozen=True)
class RopeParams:
    head_dim: int = param(128, "channels per attention head (even)")
    heads: int = param(32, "attention heads")
    rotary_dim: int | None = param(None, "leading channels that rotate, even, ≤ head_dim (partial rotary); default head_dim")
    base: float = param(10000.0, "rope_theta, the frequency base (> 1)")
    pair_layout: str = param("half", "which channels pair up", PAIR_LAYOUTS)
    layout: str = param("bshd", "axis order of x: [batch, seq, heads, dim] or [batch, heads, seq, dim]", LAYOUTS)
    max_positions: int = param(4096, "positions the model was trained for (max_position_embeddings)")
    position_limit: int | None = param(
        None, "positions the graph covers exactly; beyond it the runtime raises; default max(131072, 2·max_positions)"
    )
    scaling: str = param("default", "frequency scaling", tuple(scaling.SCALINGS))

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
        check(self.max_positions >= 1, "max_positions", self.max_positions, "must be ≥ 1")
        if self.position_limit is None:
            wanted = max(MIN_LIMIT, 2 * self.max_positions)
            object.__setattr__(self, "position_limit", 1 << math.ceil(math.log2(wanted)))
        check(self.max_positions <= self.position_limit <= 1 << 31, "position_limit", self.position_limit,
              f"must be in [max_positions={self.max_positions}, 2^31]")


# --- pure functions: frequencies, tables, the float64 oracle ---------------------------------------


def inv_freq_and_factor(p: RopeParams) -> tuple[np.ndarray, float]:
    return scaling.SCALINGS[p.scaling](p.rotary_dim, p.base, p)


def build_rope_tables(p: RopeParams) -> tables.TwoLevelTables:
    inv_freq, factor = inv_freq_and_factor(p)
    return tables.build_two_level(inv_freq, p.position_limit, scale=factor)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pair_layout: str) -> np.ndarray:
    """Rotate the last axis of x [..., d] by cos/sin [..., d/2] (broadcast), in the given pair layout."""
    n = cos.shape[-1]
    if pair_layout == "half":
        a, b = x[..., :n], x[..., n : 2 * n]
    else:
        a, b = x[..., 0 : 2 * n : 2], x[..., 1 : 2 * n : 2]
    ya, yb = a * cos - b * sin, b * cos + a * sin
    if pair_layout == "half":
        return np.concatenate([ya, yb], axis=-1)
    return np.stack([ya, yb], axis=-1).reshape(x.shape[:-1] + (2 * n,))


def reference(p: RopeParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    positions = np.asarray(feeds["position_ids"])
    inv_freq, factor = inv_freq_and_factor(p)
    theta = tables.angles(positions, inv_freq)  # [b, s, n]
    cos, sin = np.cos(theta) * factor, np.sin(theta) * factor
    heads_axis = 2 if p.layout == "bshd" else 1
    cos, sin = np.expand_dims(cos, heads_axis), np.expand_dims(sin, heads_axis)
    rotated = apply_rope(x[..., : p.rotary_dim], cos, sin, p.pair_layout)
    return np.concatenate([rotated, x[..., p.rotary_dim :]], axis=-1)


# --- torch ------------------------------------------------------------------------------------------


class RotaryEmbedding(torch.nn.Module):
    """Holds the two-level tables as buffers; forward(x, position_ids) -> rotated x, any length."""

    def __init__(self, p: RopeParams):
        super().__init__()
        self.p = p
        t = build_rope_tables(p)
        for name, value in t.as_dict(COMPUTE.numpy).items():
            self.register_buffer(name, torch.from_numpy(value), persistent=False)
        self.fine_rows = t.fine_rows
        self.limit = t.limit

    def cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # A negative position is sent past the coarse table, so the lookup fails instead of wrapping.
        safe = torch.where(position_ids < 0, self.limit, position_ids)
        coarse, fine = safe // self.fine_rows, safe % self.fine_rows
        cf, sf = torch.nn.functional.embedding(fine, self.fine_cos), torch.nn.functional.embedding(fine, self.fine_sin)
        cc, sc = torch.nn.functional.embedding(coarse, self.coarse_cos), torch.nn.functional.embedding(coarse, self.coarse_sin)
        return cc * cf - sc * sf, sc * cf + cc * sf

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        p = self.p
        cos, sin = self.cos_sin(position_ids)  # [b, s, n]
        heads_axis = 2 if p.layout == "bshd" else 1
        cos, sin = cos.unsqueeze(heads_axis), sin.unsqueeze(heads_axis)
        xf = x.to(torch.float32)
        rot, rest = xf[..., : p.rotary_dim], xf[..., p.rotary_dim :]
        n = p.rotary_dim // 2
        if p.pair_layout == "half":
            a, b = rot[..., :n], rot[..., n:]
            y = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        else:
            pairs = rot.unflatten(-1, (n, 2))
            a, b = pairs[..., 0], pairs[..., 1]
            y = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        if p.rotary_dim < p.head_dim:
            y = torch.cat([y, rest], dim=-1)
        return y.to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def cos_sin_function(fine_rows: int, limit: int, op: Any) -> Any:
    """posexport.RopeCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin [b, s, n]."""

    @script(POSEXPORT, default_opset=op)
    def RopeCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        # Negative positions go past the coarse table: Gather then raises instead of wrapping around.
        negative = op.Less(position_ids, op.Constant(value_int=0))
        safe = op.Where(negative, op.Constant(value_int=limit), position_ids)
        coarse = op.Div(safe, op.Constant(value_int=fine_rows))
        fine = op.Mod(safe, op.Constant(value_int=fine_rows))
        cf = op.Gather(fine_cos, fine)
        sf = op.Gather(fine_sin, fine)
        cc = op.Gather(coarse_cos, coarse)
        sc = op.Gather(coarse_sin, coarse)
        cos = op.Sub(op.Mul(cc, cf), op.Mul(sc, sf))
        sin = op.Add(op.Mul(sc, cf), op.Mul(cc, sf))
        return cos, sin

    return RopeCosSin


def rope_functions(p: RopeParams, t: tables.TwoLevelTables, io: DType, op: Any, backend: str) -> list[Any]:
    """posexport.Rope: per-token cos/sin from RopeCosSin, then the backend's RopeRotate (posexport.backends)."""
    cos_sin = cos_sin_function(t.fine_rows, t.limit, op)
    rotation = backends.get_backend(backend).rotation(p, io.onnx, op)
    rotate = rotation[-1]

    @script(POSEXPORT, default_opset=op)
    def Rope(x, position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        cos, sin = cos_sin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin)
        return rotate(x, cos, sin)

    return [Rope, cos_sin, *rotation]


# --- the encoding -----------------------------------------------------------------------------------


class RopeEncoding(Encoding):
    name = "rope"
    family = "rope"
    summary = "rotary position embedding (RoPE) of q/k, with partial rotary and scalings"
    Params = RopeParams
    position_scaled_tolerance = True

    def inputs(self, p: RopeParams) -> list[TensorSpec]:
        x_dims = ("batch", "seq", p.heads, p.head_dim) if p.layout == "bshd" else ("batch", p.heads, "seq", p.head_dim)
        return [TensorSpec("x", x_dims), TensorSpec("position_ids", ("batch", "seq"), is_float=False)]

    def reference(self, p: RopeParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return reference(p, feeds)

    def torch_module(self, p: RopeParams, opts: BuildOptions) -> torch.nn.Module:
        return RotaryEmbedding(p)

    def tables(self, p: RopeParams, opts: BuildOptions) -> Tables:
        return Tables(build_rope_tables(p).as_dict(COMPUTE.numpy))

    def script_functions(self, p: RopeParams, opts: BuildOptions, op: Any) -> list[Any]:
        return rope_functions(p, build_rope_tables(p), opts.dtype, op, opts.backend)

    def feeds(self, p: RopeParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        batch, seq = case.axes["batch"], case.axes["seq"]
        shape = (batch, seq, p.heads, p.head_dim) if p.layout == "bshd" else (batch, p.heads, seq, p.head_dim)
        return {"x": random_normal(rng, shape, dtype), "position_ids": positions(rng, batch, seq, case)}

    def cases(self, p: RopeParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return sequence_cases(p.max_positions, p.position_limit, seqs, batches)

    def largest_position(self, p: RopeParams, feeds: Mapping[str, np.ndarray]) -> int | None:
        return int(np.max(feeds["position_ids"]))
