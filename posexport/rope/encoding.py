"""Rotary position embedding (DESIGN 3.5), plain and scaled.

Channel layouts of the rotated part (d = rotary_dim, n = d/2 frequencies):

    half:        x: [a0 a1 … a(n−1) | b0 b1 … b(n−1)]    a_i pairs with b_i   (GPT-NeoX, LLaMA)
    interleaved: x: [a0 b0 a1 b1 … a(n−1) b(n−1)]        a_i pairs with b_i   (GPT-J, original)

    y_a = a·cos(p·θ_i) − b·sin(p·θ_i),  y_b = b·cos(p·θ_i) + a·sin(p·θ_i)

Channels past rotary_dim pass through unchanged. cos and sin come from two-level float64 tables
(posexport.tables), so any position below the graph's limit is exact and any other raises. Scalings
(posexport.scaling) change the tables' frequencies and attention factor; longrope stacks a short and a
long table set and picks one per call from max(position_ids) + 1; dynamic NTK has no tables and forms its
angles in float64 inside the graph, from the same run-time length.
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

from .. import tables
from ..contract import BuildOptions, Case, Tables, TensorSpec
from ..dtypes import COMPUTE, DType
from ..encodings.base import Encoding
from ..encodings.inputs import positions, random_normal, sequence_cases
from ..encodings.two_level import TwoLevelCosSin, cos_sin_function, gather_function
from ..params import check, check_choices, param
from ..script import POSEXPORT
from . import backends, scaling

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
    scaling: str = param("default", "frequency scaling (DESIGN 3.5); each takes only its own options below", tuple(scaling.SCALINGS))
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
        pin_position_limit(self)
        scaling.validate(self)


def pin_position_limit(p: Any) -> None:
    """Check max_positions and fill in the default position_limit, max(131072, 2·max_positions) rounded
    up to a power of two (rope and M-RoPE params)."""
    check(p.max_positions >= 1, "max_positions", p.max_positions, "must be ≥ 1")
    if p.position_limit is None:
        wanted = max(MIN_LIMIT, 2 * p.max_positions)
        object.__setattr__(p, "position_limit", 1 << math.ceil(math.log2(wanted)))
    check(p.max_positions <= p.position_limit <= 1 << 31, "position_limit", p.position_limit,
          f"must be in [max_positions={p.max_positions}, 2^31]")


# --- pure functions: frequencies, tables, the float64 oracle ---------------------------------------


def inv_freq_and_factor(p: RopeParams, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """float64 inverse frequencies and attention factor; seq_len matters for dynamic and longrope only."""
    return scaling.frequencies(p, seq_len)


def run_length(position_ids: np.ndarray) -> int:
    """seq_len = max(position_ids) + 1 over the whole batch: what dynamic and longrope decide on."""
    return int(np.max(position_ids)) + 1


def build_rope_tables(p: RopeParams) -> tables.TwoLevelTables:
    """Two-level cos/sin tables; longrope stacks its short regime (0) and long regime (1)."""
    if p.scaling == "longrope":
        original = scaling.longrope_original(p)
        regimes = [inv_freq_and_factor(p, original), inv_freq_and_factor(p, original + 1)]
        return tables.stack_regimes([tables.build_two_level(f, p.position_limit, scale=a) for f, a in regimes])
    inv_freq, factor = inv_freq_and_factor(p)
    return tables.build_two_level(inv_freq, p.position_limit, scale=factor)


def build_dynamic_tables(p: RopeParams) -> dict[str, np.ndarray]:
    """Dynamic NTK's inputs, for angles formed in float64 inside the graph (DESIGN 4.1):
    b'^(−2i/d) = θ_i · ratio^(−2i/(d−2)), ratio = 1 + (s/Lmax)·(L − Lmax), L = max(seq_len, Lmax)."""
    d = p.rotary_dim
    return {
        "inv_freq": scaling.plain_inv_freq(d, p.base),
        "ratio_exponent": -np.arange(0, d, 2, dtype=np.float64) / (d - 2),
        "length_scale": np.array([p.factor / p.max_positions], dtype=np.float64),
        "max_positions": np.array([p.max_positions], dtype=np.int64),
    }


def cos_sin_tables(p: RopeParams) -> dict[str, np.ndarray]:
    """The four arrays the cos/sin source takes after position_ids, as graph initializers."""
    if p.scaling == "dynamic":
        return build_dynamic_tables(p)
    return build_rope_tables(p).as_dict(COMPUTE.numpy)


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
    inv_freq, factor = inv_freq_and_factor(p, run_length(positions))
    theta = tables.angles(positions, inv_freq)  # [b, s, n]
    cos, sin = np.cos(theta) * factor, np.sin(theta) * factor
    heads_axis = 2 if p.layout == "bshd" else 1
    cos, sin = np.expand_dims(cos, heads_axis), np.expand_dims(sin, heads_axis)
    rotated = apply_rope(x[..., : p.rotary_dim], cos, sin, p.pair_layout)
    return np.concatenate([rotated, x[..., p.rotary_dim :]], axis=-1)


# --- torch ------------------------------------------------------------------------------------------


class TableCosSin(torch.nn.Module):
    """cos/sin [b, s, n] from two-level tables (one regime, or longrope's short and long regimes)."""

    def __init__(self, p: RopeParams):
        super().__init__()
        self.lookup = TwoLevelCosSin(build_rope_tables(p))
        self.original = scaling.longrope_original(p) if p.scaling == "longrope" else None

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.original is None:
            return self.lookup(position_ids)
        # longrope: regime 1 (long factors) once seq_len = max(position_ids) + 1 exceeds L0, per call.
        return self.lookup(position_ids, (position_ids.max() + 1 > self.original).to(torch.int64))


class DynamicCosSin(torch.nn.Module):
    """Dynamic NTK: frequencies from seq_len = max(position_ids) + 1 on every call, angles in float64."""

    def __init__(self, p: RopeParams):
        super().__init__()
        for name, value in build_dynamic_tables(p).items():
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


class RotaryEmbedding(torch.nn.Module):
    """Holds the cos/sin source (tables as buffers); forward(x, position_ids) -> rotated x, any length."""

    def __init__(self, p: RopeParams):
        super().__init__()
        self.p = p
        self.cos_sin_source = DynamicCosSin(p) if p.scaling == "dynamic" else TableCosSin(p)

    def cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_sin_source(position_ids)

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


def longrope_cos_sin_function(t: tables.TwoLevelTables, p: RopeParams, op: Any) -> Any:
    """posexport.RopeCosSinLongrope(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin:
    the two-level lookup of two_level.py with the regime decided per call."""
    fine_rows, coarse_rows, limit, past_every_regime = t.fine_rows, t.coarse_rows, t.limit, t.regimes * t.limit
    original = scaling.longrope_original(p)
    gather = gather_function(op)

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


DOUBLE_ONE = onnx.numpy_helper.from_array(np.array([1.0], dtype=np.float64))


def dynamic_cos_sin_function(p: RopeParams, op: Any) -> Any:
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


def cos_sin_source(p: RopeParams, op: Any) -> Any:
    """The scaling's function from position_ids and four tables to per-token cos/sin [b, s, n]."""
    if p.scaling == "dynamic":
        return dynamic_cos_sin_function(p, op)
    if p.scaling == "longrope":
        return longrope_cos_sin_function(build_rope_tables(p), p, op)
    return cos_sin_function(build_rope_tables(p), op)


def rope_functions(p: RopeParams, io: DType, op: Any, backend: str) -> list[Any]:
    """posexport.Rope: per-token cos/sin from the scaling's source, then the backend's RopeRotate
    (posexport.backends)."""
    cos_sin = cos_sin_source(p, op)
    rotation = backends.get_backend(backend).rotation(p, io.onnx, op)
    rotate = rotation[-1]

    # t0 … t3: the cos/sin source's four tables (two-level cos/sin, or dynamic NTK's inputs).
    @script(POSEXPORT, default_opset=op)
    def Rope(x, position_ids, t0, t1, t2, t3):
        cos, sin = cos_sin(position_ids, t0, t1, t2, t3)
        return rotate(x, cos, sin)

    return [Rope, cos_sin, *rotation]


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


class RopeEncoding(Encoding):
    name = "rope"
    family = "rope"
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
        return Tables(cos_sin_tables(p))

    def script_functions(self, p: RopeParams, opts: BuildOptions, op: Any) -> list[Any]:
        return rope_functions(p, opts.dtype, op, opts.backend)

    def feeds(self, p: RopeParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        batch, seq = case.axes["batch"], case.axes["seq"]
        shape = (batch, seq, p.heads, p.head_dim) if p.layout == "bshd" else (batch, p.heads, seq, p.head_dim)
        return {"x": random_normal(rng, shape, dtype), "position_ids": positions(rng, batch, seq, case)}

    def cases(self, p: RopeParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return sequence_cases(p.max_positions, p.position_limit, seqs, batches) + switch_cases(p, batches)

    def largest_position(self, p: RopeParams, feeds: Mapping[str, np.ndarray]) -> int | None:
        return int(np.max(feeds["position_ids"]))

    def properties(self, p: RopeParams) -> list:
        """Relative position, norms and the limit, checked on runtime outputs (posexport.properties)."""
        from .. import properties as props

        def rotate(runner: Any, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
            # The checks speak [batch, seq, heads, d]; a bhsd graph gets and gives [batch, heads, seq, d].
            if p.layout == "bshd":
                return runner({"x": x, "position_ids": positions})
            return np.swapaxes(runner({"x": np.ascontiguousarray(np.swapaxes(x, 1, 2)), "position_ids": positions}), 1, 2)

        def feeds_at(positions: np.ndarray, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
            return self.feeds(p, Case("limit", {"batch": 1, "seq": positions.shape[1]}), dtype, rng) | {"position_ids": positions}

        def tolerance(dtype: DType, largest: int) -> float:
            # Scores and norms are normalised by their largest value, whose rounding grows with the
            # rotated width as the errors do: a small multiple of the outputs' bound covers both runs.
            return 4 * dtype.bound(largest)

        # Dynamic NTK and LongRoPE change frequencies with the run-time length: stay below the switch.
        span = p.max_positions if p.scaling in ("dynamic", "longrope") else p.position_limit
        _, factor = inv_freq_and_factor(p)
        return [
            props.relative_position(rotate, p.heads, p.head_dim, span, tolerance),
            props.norm_preserved(rotate, p.heads, p.head_dim, p.rotary_dim, p.position_limit, factor, tolerance),
            props.raises_past_limit(feeds_at, p.position_limit),
        ]


ENCODING = RopeEncoding()
