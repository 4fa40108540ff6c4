"""Floating-point I/O types of built graphs and their DESIGN 4.2 tolerances."""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
import torch

from .errors import ParamError


@dataclass(frozen=True)
class DType:
    name: str
    numpy: np.dtype
    torch: torch.dtype
    onnx: int
    # Upper bound on max|out - ref| / max(1, max|ref|) against the float64 oracle (DESIGN 4.2).
    tolerance: float

    def bound(self, largest_position: int | None = None) -> float:
        """The tolerance, grown by log2 of the largest position for float32 rope/sinusoidal outputs."""
        if self.name == "float32" and largest_position is not None:
            return self.tolerance * (math.log2(max(largest_position, 1)) + 1)
        return self.tolerance


DTYPES: dict[str, DType] = {
    "float32": DType("float32", np.dtype(np.float32), torch.float32, onnx.TensorProto.FLOAT, 1e-6),
    "float16": DType("float16", np.dtype(np.float16), torch.float16, onnx.TensorProto.FLOAT16, 4e-3),
    "bfloat16": DType("bfloat16", np.dtype(ml_dtypes.bfloat16), torch.bfloat16, onnx.TensorProto.BFLOAT16, 3e-2),
}

# Tables and arithmetic inside graphs run in float32 whatever the I/O type: onnxruntime's CPU provider
# has few float16/bfloat16 kernels, and two-level tables need float32 to stay exact. Outputs round once.
COMPUTE = DTYPES["float32"]


def get_dtype(name: str) -> DType:
    try:
        return DTYPES[name]
    except KeyError:
        raise ParamError("dtype", name, f"choose one of {', '.join(DTYPES)}") from None


def from_onnx(elem_type: int) -> DType:
    for dtype in DTYPES.values():
        if dtype.onnx == elem_type:
            return dtype
    raise KeyError(onnx.TensorProto.DataType.Name(elem_type))
