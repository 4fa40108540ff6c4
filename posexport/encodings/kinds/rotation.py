"""Rotations: q/k turned by their positions (docs/contract.md, inputs and outputs per family; layouts).

    x             [batch, seq, heads, head_dim] (layout bshd), [batch, heads, seq, head_dim] (bhsd) or
                  [batch, seq, heads·head_dim] (bsh: packed, as a q/k projection writes it), I/O dtype
    position_ids  [batch, seq] int64
    y             shaped like x: the leading rotary_dim channels rotated pair by pair, the rest passed through

Channel layouts of the rotated part (d = rotary_dim, n = d/2 frequencies):

    half:        x: [a0 a1 … a(n−1) | b0 b1 … b(n−1)]    a_i pairs with b_i   (GPT-NeoX, LLaMA)
    interleaved: x: [a0 b0 a1 b1 … a(n−1) b(n−1)]        a_i pairs with b_i   (GPT-J, original)
    deinterleave: x as interleaved, y as half: [ya0 … ya(n−1) | yb0 … yb(n−1)]  (DeepSeek-V3's
                  rope_interleave: the model de-interleaves the channels, then rotates half-split)

    y_a = a·cos_i − b·sin_i,  y_b = b·cos_i + a·sin_i     (cos_i, sin_i per token, attention factor inside)

A rotation encoding says only where per-token cos/sin [batch, seq, n] come from (float64 for the
reference, a torch module and an onnxscript function over its tables) and how the graph rotates; this
kind supplies the inputs, feeds, sweep, the torch module and entry function (float32 inside, the I/O
dtype rounded once), and the rope properties on the graph's outputs. Params carry heads, head_dim,
rotary_dim, layout, pair_layout, max_positions and position_limit.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from onnxscript import script

from ...contract import BuildOptions, Case, Property, TensorSpec
from ...dtypes import DType
from ...script import POSEXPORT
from .. import properties as props
from ..base import Encoding
from ..guards import position_guard, shared_axes
from ..inputs import positions, random_normal, sequence_cases

PAIR_LAYOUTS = ("half", "interleaved")
# rope's layouts: also reading interleaved pairs and writing them half-split.
ROPE_PAIR_LAYOUTS = (*PAIR_LAYOUTS, "deinterleave")
LAYOUTS = ("bshd", "bhsd", "bsh")


def heads_axis(p: Any) -> int:
    """The heads axis of x seen as 4-D (bsh is viewed as [batch, seq, heads, head_dim])."""
    return 1 if p.layout == "bhsd" else 2


def unpacked(p: Any, x: np.ndarray) -> np.ndarray:
    """x as 4-D: a packed bsh x [b, s, heads·d] viewed as [b, s, heads, d]; other layouts as they are."""
    return x.reshape(x.shape[:2] + (p.heads, p.head_dim)) if p.layout == "bsh" else x


def packed(p: Any, y: np.ndarray) -> np.ndarray:
    """The inverse of ``unpacked``: a bsh graph's y is [b, s, heads·d]."""
    return y.reshape(y.shape[:2] + (-1,)) if p.layout == "bsh" else y


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pair_layout: str) -> np.ndarray:
    """Rotate the last axis of x [..., d] by cos/sin [..., d/2] (broadcast), in the given pair layout."""
    n = cos.shape[-1]
    if pair_layout == "half":
        a, b = x[..., :n], x[..., n : 2 * n]
    else:
        a, b = x[..., 0 : 2 * n : 2], x[..., 1 : 2 * n : 2]
    ya, yb = a * cos - b * sin, b * cos + a * sin
    if pair_layout != "interleaved":
        return np.concatenate([ya, yb], axis=-1)
    return np.stack([ya, yb], axis=-1).reshape(x.shape[:-1] + (2 * n,))


def rotate_reference(p: Any, x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """y in float64 from x and per-token cos/sin [batch, seq, n] in float64."""
    x = unpacked(p, np.asarray(x).astype(np.float64))
    axis = heads_axis(p)
    rotated = apply_rope(x[..., : p.rotary_dim], np.expand_dims(cos, axis), np.expand_dims(sin, axis), p.pair_layout)
    return packed(p, np.concatenate([rotated, x[..., p.rotary_dim :]], axis=-1))


class RotationModule(torch.nn.Module):
    """Holds the cos/sin source (tables as buffers); forward(x, position_ids) -> rotated x, any length,
    computed in float32 and cast once to x's dtype."""

    def __init__(self, p: Any, cos_sin_source: torch.nn.Module):
        super().__init__()
        self.p = p
        self.cos_sin_source = cos_sin_source

    def cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_sin_source(position_ids)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        p = self.p
        cos, sin = self.cos_sin(position_ids)  # [b, s, n]
        cos, sin = cos.unsqueeze(heads_axis(p)), sin.unsqueeze(heads_axis(p))
        xf = x.to(torch.float32)
        if p.layout == "bsh":
            xf = xf.unflatten(-1, (p.heads, p.head_dim))
        rot, rest = xf[..., : p.rotary_dim], xf[..., p.rotary_dim :]
        n = p.rotary_dim // 2
        if p.pair_layout == "deinterleave":
            pairs = rot.unflatten(-1, (n, 2))
            a, b = pairs[..., 0], pairs[..., 1]
            y = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        elif p.pair_layout == "half":
            a, b = rot[..., :n], rot[..., n:]
            y = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        else:
            pairs = rot.unflatten(-1, (n, 2))
            a, b = pairs[..., 0], pairs[..., 1]
            y = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        if p.rotary_dim < p.head_dim:
            y = torch.cat([y, rest], dim=-1)
        if p.layout == "bsh":
            y = y.flatten(-2)
        return y.to(x.dtype)


def rotation_entry(cos_sin: Any, rotate: Any, op: Any, guard: Any) -> Any:
    """posexport.Rope(x, position_ids, t0, t1, t2, t3) -> y: per-token cos/sin from the four tables
    (t0 … t3, whatever the cos/sin function makes of them), then the rotation, which reads x in the I/O
    dtype, computes in float32 and casts back once (no Cast at all for float32 I/O)."""

    @script(POSEXPORT, default_opset=op)
    def Rope(x, position_ids, t0, t1, t2, t3):
        cos, sin = cos_sin(guard(x, position_ids), t0, t1, t2, t3)  # guard: position_ids is [batch, seq] of x
        return rotate(x, cos, sin)

    return Rope


class Rotation(Encoding):
    """An encoding implements ``Params``, ``reference_cos_sin``, ``cos_sin_module``, ``tables``,
    ``cos_sin_function`` and ``rotate_functions``; ``steady_span``, ``attention_factor`` and
    ``extra_cases`` have defaults."""

    family = "rope"
    # float32 cos/sin bounds grow with log2 of the largest position (docs/numerics.md).
    position_scaled_tolerance = True

    @abstractmethod
    def reference_cos_sin(self, p: Any, position_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """float64 cos, sin [batch, seq, n] for these positions, attention factor inside."""

    @abstractmethod
    def cos_sin_module(self, p: Any) -> torch.nn.Module:
        """forward(position_ids) -> cos, sin [batch, seq, n] float32, from buffers holding the tables."""

    @abstractmethod
    def cos_sin_function(self, p: Any, op: Any) -> Any:
        """onnxscript (position_ids, t0, t1, t2, t3) -> cos, sin; t0 … t3 are ``tables`` in order."""

    @abstractmethod
    def rotate_functions(self, p: Any, opts: BuildOptions, op: Any) -> list[Any]:
        """onnxscript functions, callees first, ending with rotate(x, cos, sin) -> y."""

    def steady_span(self, p: Any) -> int:
        """Positions [0, span) over which cos/sin do not depend on the call's length."""
        return p.position_limit

    def attention_factor(self, p: Any) -> float:
        """The factor in cos and sin: |y| = factor·|x| over the rotated channels."""
        return 1.0

    def extra_cases(self, p: Any, batches: tuple[int, ...] | None) -> list[Case]:
        """Cases the encoding adds to the sequence sweep (around a switch length, say)."""
        return []

    # --- the contract -----------------------------------------------------------------------------
    def x_shape(self, p: Any, batch: Any, seq: Any) -> tuple[Any, ...]:
        return {"bshd": (batch, seq, p.heads, p.head_dim), "bhsd": (batch, p.heads, seq, p.head_dim),
                "bsh": (batch, seq, p.heads * p.head_dim)}[p.layout]

    def inputs(self, p: Any) -> list[TensorSpec]:
        return [TensorSpec("x", self.x_shape(p, "batch", "seq")), TensorSpec("position_ids", ("batch", "seq"), is_float=False)]

    def reference(self, p: Any, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        cos, sin = self.reference_cos_sin(p, np.asarray(feeds["position_ids"]))
        return rotate_reference(p, feeds["x"], cos, sin)

    def torch_module(self, p: Any, opts: BuildOptions) -> torch.nn.Module:
        return RotationModule(p, self.cos_sin_module(p))

    def script_functions(self, p: Any, opts: BuildOptions, op: Any) -> list[Any]:
        cos_sin = self.cos_sin_function(p, op)
        rotation = self.rotate_functions(p, opts, op)
        guard = position_guard(shared_axes(self.inputs(p)), op)
        return [rotation_entry(cos_sin, rotation[-1], op, guard), cos_sin, guard, *rotation]

    def feeds(self, p: Any, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        batch, seq = case.axes["batch"], case.axes["seq"]
        return {"x": random_normal(rng, self.x_shape(p, batch, seq), dtype), "position_ids": positions(rng, batch, seq, case)}

    def cases(self, p: Any, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return self.within_limits(p, sequence_cases(p.max_positions, p.position_limit, seqs, batches) + self.extra_cases(p, batches), seqs, batches)

    def largest_position(self, p: Any, feeds: Mapping[str, np.ndarray]) -> int | None:
        return int(np.max(feeds["position_ids"]))

    # --- properties -------------------------------------------------------------------------------
    def properties(self, p: Any) -> list[Property]:
        """Relative position (inside the steady span), norms times the attention factor, and the limit,
        checked on runtime outputs (posexport.encodings.properties)."""

        def rotate(runner: Any, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
            # The checks speak [batch, seq, heads, d]; a bhsd graph gets and gives [batch, heads, seq, d],
            # a bsh graph [batch, seq, heads·d].
            if p.layout == "bhsd":
                return np.swapaxes(runner({"x": np.ascontiguousarray(np.swapaxes(x, 1, 2)), "position_ids": positions}), 1, 2)
            return unpacked(p, runner({"x": packed(p, x), "position_ids": positions}))

        def feeds_at(positions: np.ndarray, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
            return self.feeds(p, Case("limit", {"batch": 1, "seq": positions.shape[1]}), dtype, rng) | {"position_ids": positions}

        def tolerance(dtype: DType, largest: int) -> float:
            # Scores and norms are normalised by their largest value, whose rounding grows with the
            # rotated width as the errors do: a small multiple of the outputs' bound covers both runs.
            return 4 * dtype.bound(largest)

        return [
            props.relative_position(rotate, p.heads, p.head_dim, self.steady_span(p), tolerance),
            props.norm_preserved(rotate, p.heads, p.head_dim, p.rotary_dim, p.position_limit, self.attention_factor(p), tolerance),
            props.raises_past_limit(feeds_at, p.position_limit),
        ]
