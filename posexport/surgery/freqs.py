"""Frequencies read back from a graph, recognised as a rope posexport knows, and the float64 error of
what the graph computes: from stored cos/sin caches, or from float32 angles formed on every call."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..rope import encoding as rope
from ..rope.scaling import switch_length
from ..tables import plain_inv_freq

# Recovered frequencies agree with a recognised rope to this relative error (float32 storage and the
# exporter's float32 angles leave ~1e-7; a different base or factor is orders of magnitude away).
RECOGNISED = 2e-5
# A cos/sin error above this is a fault (float32 rounding of exact values is 6e-8).
PRECISION_FAULT = 1e-6
# Where precision is projected when no position limit is asked for.
PROJECTED = 1 << 17
# Caches a fused op reads in the model's own float type: their rounding alone is a fault.
LOW_PRECISION = ("float16", "bfloat16")
ROWS_AT_ONCE = 1 << 14  # rows measured per step: float64 temporaries stay a few MB whatever the cache's length


def from_cache(cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, float]:
    """(inv_freq float64 [n], attention factor) from caches [rows, n]: the angle of row 1 gives each
    frequency to within a turn, the last row refines it (unwrapped), and row 0 holds the factor."""
    c, s = cos.astype(np.float64), sin.astype(np.float64)
    factor = float(np.hypot(c[0], s[0]).mean())
    coarse = np.arctan2(s[1], c[1]) if len(c) > 1 else np.zeros(c.shape[1])
    last = len(c) - 1
    if last < 2:
        return coarse, factor
    angle = np.arctan2(s[last], c[last])
    turns = np.round((coarse * last - angle) / (2 * math.pi))
    return (angle + 2 * math.pi * turns) / last, factor


def snap_base(inv_freq: np.ndarray) -> float:
    """The base whose plain rope gives the second frequency, rounded to 6 significant digits."""
    dim = 2 * len(inv_freq)
    base = float(inv_freq[1]) ** (-dim / 2)
    return float(f"{base:.6g}")


def close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(len(a)) and float(np.max(np.abs(a / b - 1))) <= RECOGNISED


def close_to_cache(got: np.ndarray, expected: np.ndarray, cache: np.ndarray) -> bool:
    """Frequencies read back from a cache agree with ``expected``: to RECOGNISED relative, plus what the
    cache's own rounding allows (a few units of its float type in the last row's angle)."""
    slack = 4 * float(np.finfo(cache.dtype).eps) / max(len(cache) - 1, 1)
    return bool(len(got)) and bool(np.all(np.abs(got - expected) <= RECOGNISED * expected + slack))


def recognise(inv_freq: np.ndarray) -> dict[str, Any] | None:
    """Rope options of a plain or linearly scaled rope that gives these frequencies, else None."""
    if len(inv_freq) < 2 or not np.all(np.isfinite(inv_freq)) or np.any(inv_freq <= 0):
        return None
    dim = 2 * len(inv_freq)
    factor = 1.0 / float(inv_freq[0])
    scaled = inv_freq * factor
    base = snap_base(scaled)
    if base <= 1 or not close(scaled, plain_inv_freq(dim, base)):
        return None
    values: dict[str, Any] = {"head_dim": dim, "base": base}
    if abs(factor - 1) > RECOGNISED:
        values |= {"scaling": "linear", "factor": float(f"{factor:.6g}")}
    return values


def exact_from(inv_freq: np.ndarray, factor: float, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 cos/sin [len(positions), n] of these frequencies, attention factor applied."""
    theta = np.asarray(positions, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)
    return np.cos(theta) * factor, np.sin(theta) * factor


def cache_error(cos: np.ndarray, sin: np.ndarray, truth: tuple[np.ndarray, float], row: int) -> float:
    """max |cache − float64| over cos and sin at ``row``; ``truth`` is (inv_freq, attention factor)."""
    c, s = exact_from(*truth, np.array([row]))
    return float(max(np.max(np.abs(cos[row].astype(np.float64) - c[0])), np.max(np.abs(sin[row].astype(np.float64) - s[0]))))


def rounding_bound(dtype: np.dtype) -> float:
    """Half a unit in the last place of cos/sin values in [0.5, 1): the most rounding once can leave."""
    return float(np.finfo(dtype).eps) / 4


def low_precision_error(cos: np.ndarray, sin: np.ndarray, truth: tuple[np.ndarray, float]) -> tuple[float, float, int]:
    """Over every row of low-precision caches: (max |cache − float64|, the same for the float64 values
    rounded once to the cache's type, how many entries are not that rounding)."""
    error = floor = 0.0
    off = 0
    for start in range(0, len(cos), ROWS_AT_ONCE):
        exact = exact_from(*truth, np.arange(start, min(start + ROWS_AT_ONCE, len(cos))))
        for stored, value in zip((cos, sin), exact):
            got = stored[start:start + len(value)].astype(np.float64)
            once = value.astype(stored.dtype).astype(np.float64)
            error, floor = max(error, float(np.max(np.abs(got - value)))), max(floor, float(np.max(np.abs(once - value))))
            off += int(np.count_nonzero(got != once))
    return error, floor, off


def float32_error(inv_freq32: np.ndarray, factor: float, truth: tuple[np.ndarray, float], position: int) -> float:
    """max |cos/sin − float64| of angles formed per call in float32 (position · inv_freq, then Cos/Sin);
    ``truth`` is the (inv_freq, attention factor) the graph should compute."""
    angle = np.float32(position) * inv_freq32.astype(np.float32)
    c, s = exact_from(*truth, np.array([position]))
    got_c = np.cos(angle).astype(np.float64) * factor
    got_s = np.sin(angle).astype(np.float64) * factor
    return float(max(np.max(np.abs(got_c - c[0])), np.max(np.abs(got_s - s[0]))))


def dynamic_gap(inv_freq: np.ndarray, factor: float, p: rope.RopeParams, length: int) -> float:
    """max |cos/sin of the graph's fixed frequencies − dynamic NTK's| at the last position of a call of
    ``length`` tokens (both in float64: the gap is the scaling, not the rounding)."""
    dynamic, _ = rope.inv_freq_and_factor(p, length)
    fixed = (length - 1) * inv_freq.astype(np.float64)
    moving = (length - 1) * dynamic
    return float(max(np.max(np.abs(factor * np.cos(fixed) - np.cos(moving))), np.max(np.abs(factor * np.sin(fixed) - np.sin(moving)))))


# Call lengths, in multiples of max_position_embeddings, at which a fixed graph's gap to dynamic NTK is stated.
DYNAMIC_MULTIPLES = (2, 4)


def dynamic_gaps(inv_freq: np.ndarray, factor: float, p: rope.RopeParams, fixed: str = "the graph's frequencies") -> tuple[str, float]:
    """(what fixed frequencies miss of dynamic NTK, in words, and the gap at 2·max_position_embeddings): the
    cos/sin gap at the last position of a call of 2× and 4× max_position_embeddings tokens, float64 both ways."""
    gaps = {m * p.max_positions: dynamic_gap(inv_freq, factor, p, m * p.max_positions) for m in DYNAMIC_MULTIPLES}
    said = " and ".join(f"{gap:.2e} off at position {length - 1} of a {length}-token call" for length, gap in gaps.items())
    return f"the model config says dynamic NTK, but {fixed} are fixed: cos/sin {said}", next(iter(gaps.values()))


def angle_gap(graph: np.ndarray, truth: np.ndarray, position: int) -> float:
    """max |cos/sin of the graph's frequencies − the truth's| at ``position`` (float64 both)."""
    a, b = position * graph, position * truth
    return float(max(np.max(np.abs(np.cos(a) - np.cos(b))), np.max(np.abs(np.sin(a) - np.sin(b)))))


def other_regime_gap(inv_freq: np.ndarray, p: rope.RopeParams, regime: str) -> tuple[int, float]:
    """(position, cos/sin gap) of frequencies frozen to LongRoPE's ``regime`` ("short" or "long") against the
    other regime, at a position of a call in that regime: 2·L0 past a frozen short one, L0 − 1 below a long one."""
    original = switch_length(p)
    other, at = (rope.inv_freq_and_factor(p, original + 1)[0], 2 * original) if regime == "short" else \
        (rope.inv_freq_and_factor(p, original)[0], original - 1)
    return at, angle_gap(inv_freq.astype(np.float64), other, at)


def describe(inv_freq: np.ndarray) -> str:
    return ", ".join(f"{v:.6g}" for v in inv_freq[:4]) + (" …" if len(inv_freq) > 4 else "")
