"""RoPE frequency scalings (DESIGN 3.5): each one small function with the same signature.

A scaling maps (rotary_dim, base, its parameters) to the float64 inverse frequencies and the attention
factor that multiplies cos and sin. The torch module, the onnxscript function and the reference all take
their frequencies from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def plain_inv_freq(dim: int, base: float) -> np.ndarray:
    """θ_i = base^(−2i/d), i = 0 … d/2−1, in float64."""
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


def default(dim: int, base: float, p: Any) -> tuple[np.ndarray, float]:
    return plain_inv_freq(dim, base), 1.0


ScalingFn = Callable[[int, float, Any], tuple[np.ndarray, float]]

SCALINGS: dict[str, ScalingFn] = {
    "default": default,
}
