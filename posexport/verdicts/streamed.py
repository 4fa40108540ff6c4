"""Comparisons that never hold a whole output: rows (every axis but the last flattened) are compared block
by block as they come, and only running values are kept: the largest difference and its position, the
largest reference value, a histogram of the differences for the 99th percentile, and for logits each
position's argmax and the reference's top two. A 262k vocabulary × 8k tokens in float64 is 17 GB; a block
of them is what is held.

The error is posexport.comparison's, max|out − ref| / max(1, max|ref|), with its conventions: where ref is
±inf out must equal it, a NaN is an infinite difference. The 99th percentile is read from the histogram
(16 bins per octave), so it is exact to 5%, and never above the largest difference.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..comparison import MISMATCH, Comparison
from .report import TokenAgreement

BINS_PER_OCTAVE = 16
LOWEST_OCTAVE = -160  # differences below 2^-160 (and zeros) share the first bin; above 2^160, the last
BINS = 2 * 160 * BINS_PER_OCTAVE
BLOCK_BYTES = 1 << 23  # float64 bytes of the reference per block when a whole array is compared in blocks


def differences(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|out − ref| in float64, inf where ref is ±inf and out differs, or where either is NaN."""
    got = np.asarray(out).astype(np.float64)
    finite = np.isfinite(ref)
    with np.errstate(invalid="ignore"):
        diff = np.abs(got - ref)
        if not finite.all():
            diff = np.where(finite, diff, np.where(got == ref, 0.0, np.inf))
    return np.where(np.isnan(diff), np.inf, diff)


class Running:
    """The comparison of an output fed as blocks of rows; a position is ``first_position + row % period``
    (``period`` the length of the sequence axis, the second-to-last of logits and caches alike)."""

    def __init__(self, period: int = 1, first_position: int | None = 0):
        self.period, self.first_position = max(period, 1), first_position
        self.worst, self.worst_row, self.scale, self.count = 0.0, -1, 1.0, 0
        self.histogram = np.zeros(BINS, dtype=np.int64)
        self.mismatch = False

    def add(self, out: np.ndarray, ref: np.ndarray, start: int) -> None:
        """Rows start … start + len(out) − 1 of the output and of the reference (float64), [k, width]."""
        if out.shape != ref.shape:
            self.mismatch = True
            return
        if ref.size == 0:
            return
        diff = np.asarray(out).astype(np.float64)
        with np.errstate(invalid="ignore"):  # inf − inf: the slow path below decides what it means
            np.subtract(diff, ref, out=diff)
        np.abs(diff, out=diff)
        largest = max(float(ref.max()), -float(ref.min()))
        if np.isfinite(largest) and np.isfinite(diff.max()):  # the usual case: one pass each, no masks
            self.scale = max(self.scale, largest)
        else:
            diff = differences(out, ref)
            finite = ref[np.isfinite(ref)]
            if finite.size:
                self.scale = max(self.scale, float(np.max(np.abs(finite))))
        flat = int(np.argmax(diff))
        if diff.flat[flat] > self.worst or self.worst_row < 0:
            self.worst, self.worst_row = float(diff.flat[flat]), start + flat // max(diff.shape[-1], 1)
        with np.errstate(divide="ignore"):
            octaves = np.log2(diff.astype(np.float32, copy=False))
        bins = np.clip(np.floor(octaves * BINS_PER_OCTAVE) - LOWEST_OCTAVE * BINS_PER_OCTAVE, 0, BINS - 1)
        self.histogram += np.bincount(bins.astype(np.int64).ravel(), minlength=BINS)
        self.count += diff.size

    def p99(self) -> float:
        """The 99th percentile of the differences (to the histogram's 5%), at most the largest."""
        if not self.count:
            return 0.0
        rank = 0.99 * (self.count - 1)
        at = int(np.searchsorted(np.cumsum(self.histogram), rank, side="right"))
        if at == 0:
            return 0.0
        edge = 2.0 ** ((at + 1) / BINS_PER_OCTAVE + LOWEST_OCTAVE)
        return min(edge, self.worst)

    def comparison(self, bound: float) -> Comparison:
        if self.mismatch:
            return Comparison(MISMATCH, MISMATCH, MISMATCH, bound)
        return Comparison(self.worst, self.worst / self.scale, self.p99() / self.scale, bound)

    @property
    def normalised(self) -> float:
        return MISMATCH if self.mismatch else self.worst / self.scale

    @property
    def position(self) -> int | None:
        """Where the largest difference is (None: nothing compared, no sequence axis, or shapes that differ)."""
        if self.worst_row < 0 or self.first_position is None or self.mismatch:
            return None
        return self.first_position + self.worst_row % self.period


class TokenTally:
    """Teacher-forced next-token agreement of logits fed as blocks of rows: per position, whether the
    output's argmax is the reference's, and at each disagreement the reference's top-1 − top-2 margin."""

    def __init__(self, period: int = 1, first_position: int = 0):
        self.period, self.first_position = max(period, 1), first_position
        self.positions = self.agreed = 0
        self.margins: list[float] = []
        self.first: int | None = None

    def add(self, out: np.ndarray, ref: np.ndarray, start: int) -> None:
        if out.shape != ref.shape or out.shape[-1] < 2:
            return
        picked = np.argmax(out, axis=-1)
        best, margin = top_two(ref)
        missed = np.flatnonzero(picked != best)
        self.positions += len(picked)
        self.agreed += len(picked) - len(missed)
        self.margins += [float(margin[i]) for i in missed]
        if len(missed) and self.first is None:
            self.first = self.first_position + (start + int(missed[0])) % self.period

    def result(self) -> TokenAgreement:
        return TokenAgreement(self.positions, self.agreed, min(self.margins, default=None), max(self.margins, default=None),
                              self.first)


def top_two(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the argmax and the gap between the largest and the second-largest value."""
    best = np.argmax(logits, axis=-1)
    pair = np.partition(logits, -2, axis=-1)[..., -2:]
    return best, pair[..., 1] - pair[..., 0]


def blocks(array: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) of an array as [rows, width] blocks of about BLOCK_BYTES in float64."""
    rows = array.reshape(-1, array.shape[-1]) if array.ndim else array.reshape(1, 1)
    step = max(1, BLOCK_BYTES // (8 * max(rows.shape[1], 1)))
    for start in range(0, len(rows), step):
        yield start, rows[start:start + step]


def compared(out: np.ndarray, ref: np.ndarray, first_position: int | None = 0, tally: TokenTally | None = None) -> Running:
    """A whole output against its reference, in blocks of rows."""
    period = ref.shape[-2] if ref.ndim >= 2 else 1
    running = Running(period, first_position if ref.ndim >= 2 else None)
    if out.shape != ref.shape:
        running.mismatch = True
        return running
    ref64 = np.asarray(ref)
    for (start, got), (_, want) in zip(blocks(np.asarray(out)), blocks(ref64)):
        want = want.astype(np.float64, copy=False)
        running.add(got, want, start)
        if tally is not None:
            tally.add(got, want, start)
    return running
