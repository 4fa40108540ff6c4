"""Floating-point I/O types of built graphs, their parity tolerances, and the one bridge between numpy
and the types numpy lacks (bfloat16).

Light on purpose: the torch and ml_dtypes types are looked up when first asked for, so the CLI's
`--help` and `list` need neither.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ParamError, not_one_of

# ONNX TensorProto.DataType values (fixed by the ONNX standard).
ONNX_FLOAT, ONNX_FLOAT16, ONNX_BFLOAT16 = 1, 10, 16


@dataclass(frozen=True)
class DType:
    name: str
    onnx: int
    # Upper bound on max|out − ref| / max(1, max|ref|) against the float64 oracle.
    tolerance: float

    @property
    def numpy(self) -> np.dtype:
        return numpy_dtype(self.name)

    @property
    def torch(self) -> Any:
        return getattr(importlib.import_module("torch"), self.name)

    def bound(self, largest_position: int | None = None) -> float:
        """The tolerance, grown by log2 of the largest position for float32 rope/sinusoidal outputs."""
        if self.name == "float32" and largest_position is not None:
            return self.tolerance * (math.log2(max(largest_position, 1)) + 1)
        return self.tolerance


@functools.cache
def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":  # numpy has no bfloat16; ml_dtypes provides the one onnx and onnxruntime use
        return np.dtype(importlib.import_module("ml_dtypes").bfloat16)
    return np.dtype(name)


DTYPES: dict[str, DType] = {
    "float32": DType("float32", ONNX_FLOAT, 1e-6),
    "float16": DType("float16", ONNX_FLOAT16, 4e-3),
    "bfloat16": DType("bfloat16", ONNX_BFLOAT16, 3e-2),
}

# Tables and arithmetic inside graphs run in float32 whatever the I/O type: onnxruntime's CPU provider
# has few float16/bfloat16 kernels, and two-level tables need float32 to stay exact. Outputs round once.
COMPUTE = DTYPES["float32"]


def get_dtype(name: str) -> DType:
    try:
        return DTYPES[name]
    except KeyError:
        raise ParamError("dtype", name, not_one_of(name, list(DTYPES), "dtype")) from None


def is_bfloat16(array: np.ndarray) -> bool:
    return array.dtype == numpy_dtype("bfloat16")


def to_float32_if_bfloat16(array: np.ndarray) -> np.ndarray:
    """Runtimes and libraries without bfloat16 (torch.from_numpy, OpenVINO tensors) take float32."""
    return array.astype(np.float32) if is_bfloat16(array) else array


def to_torch(array: np.ndarray) -> Any:
    """A torch tensor of the array's dtype; bfloat16 travels through float32, exactly."""
    torch = importlib.import_module("torch")
    tensor = torch.from_numpy(np.ascontiguousarray(to_float32_if_bfloat16(array)))
    return tensor.to(torch.bfloat16) if is_bfloat16(array) else tensor


def from_torch(tensor: Any) -> np.ndarray:
    """A numpy array of the tensor's dtype; bfloat16 travels through float32, exactly."""
    torch = importlib.import_module("torch")
    if tensor.dtype == torch.bfloat16:
        return tensor.detach().to(torch.float32).cpu().numpy().astype(numpy_dtype("bfloat16"))
    return tensor.detach().cpu().numpy()


def dtypes_of(dtype: str | Sequence[str]) -> list[str]:
    """`float16,bfloat16` or ["float16", "bfloat16"] -> ["float16", "bfloat16"]."""
    names = dtype.split(",") if isinstance(dtype, str) else list(dtype)
    return [d.strip() for d in names if d.strip()] or ["float32"]
