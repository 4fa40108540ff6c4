"""The registry of runtimes: one line each. See base.py for the base class and the session API."""

from __future__ import annotations

from ..errors import PosexportError
from .base import Bound, ModelSession, Runtime, Session, SessionOptions
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


def get_runtime(name: str, others: dict[str, Runtime] | None = None) -> Runtime:
    """The graph runtime ``name``, or one of ``others`` (posexport.verdicts adds the runners of the model's own code)."""
    try:
        return {**RUNTIMES, **(others or {})}[name]
    except KeyError:
        known = ", ".join([*RUNTIMES, *(others or {})])
        raise PosexportError(f"--runtimes {name!r}: unknown runtime; choose from {known}") from None


__all__ = ["RUNTIMES", "Bound", "ModelSession", "Runtime", "Session", "SessionOptions", "get_runtime"]
