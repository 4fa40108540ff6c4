"""Angle tables computed in float64 at build time and two-level lookup (docs/numerics.md).

A position p = q·P + r is split into a fine index r < P and a coarse index q < Q, and

    cos(pω) = cos(qPω)·cos(rω) − sin(qPω)·sin(rω)
    sin(pω) = sin(qPω)·cos(rω) + cos(qPω)·sin(rω)

so P + Q rows cover P·Q positions exactly. Both tables come from float64 angles; only the final
combination runs in float32 inside the graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def split_rows(limit: int) -> tuple[int, int]:
    """(P, Q) with P a power of two near sqrt(limit) and P·Q ≥ limit, keeping P + Q small."""
    fine = 1 << max(0, math.ceil(math.log2(math.sqrt(max(limit, 1)))))
    coarse = max(1, -(-limit // fine))
    return fine, coarse


def plain_inv_freq(dim: int, base: float) -> np.ndarray:
    """θ_i = base^(−2i/d), i = 0 … d/2−1, in float64."""
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


def angles(positions: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
    """positions [...] × inv_freq [n] -> angles [..., n] in float64."""
    return np.asarray(positions, dtype=np.float64)[..., None] * np.asarray(inv_freq, dtype=np.float64)


@dataclass(frozen=True)
class TwoLevelTables:
    """One set of tables, or several stacked along the rows (one per frequency regime, as longrope's
    short and long factors): regime k owns fine rows [k·P, (k+1)·P) and coarse rows [k·Q, (k+1)·Q)."""

    fine_cos: np.ndarray  # [regimes·P, n]: cos(r·ω)·scale, r < P
    fine_sin: np.ndarray  # [regimes·P, n]
    coarse_cos: np.ndarray  # [regimes·Q, n]: cos(q·P·ω), q < Q
    coarse_sin: np.ndarray  # [regimes·Q, n]
    regimes: int = 1

    @property
    def fine_rows(self) -> int:
        return self.fine_cos.shape[0] // self.regimes

    @property
    def coarse_rows(self) -> int:
        return self.coarse_cos.shape[0] // self.regimes

    @property
    def limit(self) -> int:
        """Positions below this are exact; at or beyond it (or negative) the graph raises."""
        return self.fine_rows * self.coarse_rows

    def as_dict(self, dtype: np.dtype) -> dict[str, np.ndarray]:
        return {
            "fine_cos": self.fine_cos.astype(dtype),
            "fine_sin": self.fine_sin.astype(dtype),
            "coarse_cos": self.coarse_cos.astype(dtype),
            "coarse_sin": self.coarse_sin.astype(dtype),
        }


def build_two_level(inv_freq: np.ndarray, limit: int, scale: float = 1.0) -> TwoLevelTables:
    """Tables for positions [0, P·Q) with P·Q ≥ limit; ``scale`` (an attention factor) goes in the fine
    rows, so it multiplies both cos and sin exactly once."""
    fine, coarse = split_rows(limit)
    fine_angles = angles(np.arange(fine), inv_freq)
    coarse_angles = angles(np.arange(coarse) * fine, inv_freq)
    return TwoLevelTables(
        fine_cos=np.cos(fine_angles) * scale,
        fine_sin=np.sin(fine_angles) * scale,
        coarse_cos=np.cos(coarse_angles),
        coarse_sin=np.sin(coarse_angles),
    )


def stack_regimes(regimes: list[TwoLevelTables]) -> TwoLevelTables:
    """Tables of several regimes (same P, Q) in one set of four arrays, regime 0 first."""
    return TwoLevelTables(
        *(np.concatenate([getattr(t, name) for t in regimes]) for name in ("fine_cos", "fine_sin", "coarse_cos", "coarse_sin")),
        regimes=len(regimes),
    )
