"""The comparators: one error formula for every verdict posexport gives.

error = max|out − ref| / max(1, max|ref|), in float64, ref the oracle (the float64 reference of a graph's
parameters, the transformers model in float64, or a second model). The error is also the smallest
tolerance that would have passed, so every report states it beside its bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Two runners each within the bound of the truth can differ by twice the bound from each other.
PAIRWISE_FACTOR = 2.0

# Whole-model bounds (posexport.verdicts.models).
TOLERANCE = 1e-4  # the default absolute bound of a float32 (or float64) model
# c of the floor-aware bound max(absolute, c · floor): an export computes what transformers' float32 forward
# computes, in another order, so its error is the floor's size, not the floor itself (a trained 30-layer
# model measured 0.9–1.6× the floor on text); a rope 1% off moves key caches by 1e-2, thousands of floors.
FLOOR_FACTOR = 4.0
# A float16 or bfloat16 model's unit roundoff u. Its weights and activations round at every step, and its
# attention sums over every cached token: the default bound is ROUNDOFF_UNITS · u · √(past + seq), the
# probabilistic bound of a length-n sum (Higham & Mary) with a margin; a wrong rope is O(1) off in the key cache.
ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
ROUNDOFF_UNITS = 4


@dataclass(frozen=True)
class Comparison:
    max_abs: float
    # max|out − ref| / max(1, max|ref|): the bounded error, and so the smallest tolerance that passes.
    normalised: float
    p99: float
    bound: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.normalised)) and self.normalised <= self.bound


MISMATCH = float("inf")


def compare(out: np.ndarray, ref: np.ndarray, bound: float) -> Comparison:
    """``out`` against ``ref`` (float64). Entries where ref is ±inf (an ALiBi mask) must match exactly;
    a NaN anywhere, or another shape, is an infinite error."""
    if out.shape != ref.shape:
        return Comparison(MISMATCH, MISMATCH, MISMATCH, bound)
    got = np.asarray(out).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(ref)
    with np.errstate(invalid="ignore"):
        diff = np.where(finite, np.abs(got - ref), np.where(got == ref, 0.0, np.inf))
    diff = np.where(np.isnan(diff), np.inf, diff)
    scale = scale_of(ref)
    worst = float(diff.max(initial=0.0))
    p99 = float(np.percentile(diff, 99)) / scale if diff.size else 0.0
    return Comparison(worst, worst / scale, p99, bound)


def scale_of(ref: np.ndarray) -> float:
    """The denominator of the error: max(1, max|ref|) over ref's finite entries."""
    ref = np.asarray(ref, dtype=np.float64)
    return max(1.0, float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0)))


def normalised_error(out: np.ndarray, ref: np.ndarray) -> float:
    """The error alone (for property checks and diagnostics that state it without a bound)."""
    return compare(out, ref, MISMATCH).normalised
