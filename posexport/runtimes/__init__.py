"""The registry of runtimes: one line each. See base.py for the base class and the session API."""

from __future__ import annotations

from ..errors import PosexportError
from .base import Bound, ModelSession, Runtime, Session, SessionOptions
from .hf import Hf
from .openvino import OpenVino
from .ort import OrtCpu
from .ort_cuda import OrtCuda
from .reference import Reference
from .torch_eager import TorchEager

RUNTIMES: dict[str, Runtime] = {
    rt.name: rt
    for rt in (
        TorchEager(),
        Reference(),
        OrtCpu("ort-cpu", optimize=True),
        OrtCpu("ort-cpu-noopt", optimize=False),
        OrtCuda(),
        OpenVino(),
    )
}
# Runtimes that run the model's own code instead of the graph (parity --from-model, or named with --runtimes).
MODEL_RUNTIMES: dict[str, Runtime] = {rt.name: rt for rt in (Hf(),)}


def get_runtime(name: str) -> Runtime:
    try:
        return {**RUNTIMES, **MODEL_RUNTIMES}[name]
    except KeyError:
        known = ", ".join([*RUNTIMES, *MODEL_RUNTIMES])
        raise PosexportError(f"--runtimes {name!r}: unknown runtime; choose from {known}") from None


__all__ = ["MODEL_RUNTIMES", "RUNTIMES", "Bound", "ModelSession", "Runtime", "Session", "SessionOptions", "get_runtime"]
