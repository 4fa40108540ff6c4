"""The registry of runtimes: one line each. See base.py for the base class and the session API."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..errors import PosexportError, unknown
from .base import Bound, ModelSession, Runtime, Session, SessionOptions
from .openvino import OpenVino
from .ort import OrtCpu
from .ort_cuda import OrtCuda
from .ort_web import OrtWeb
from .ort_web_wasm import OrtWebWasm
from .ort_webgpu import OrtWebGpu
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
        OrtWebWasm(),
        OrtWebGpu(),
    )
}


def get_runtime(name: str, browser: str | os.PathLike[str] | None = None,
                others: Mapping[str, Runtime] | None = None) -> Runtime:
    """The runtime registered as ``name``, or one of ``others`` (posexport.verdicts adds the runners of the model's own
    code); one that runs in a browser runs in ``browser`` when given."""
    try:
        runtime = {**RUNTIMES, **(others or {})}[name]
    except KeyError:
        raise PosexportError(unknown("--runtimes", name, "runtime", [*RUNTIMES, *(others or {})])) from None
    return runtime.with_browser(browser) if browser is not None and isinstance(runtime, OrtWeb) else runtime


def get_runtimes(names: Sequence[str], browser: str | os.PathLike[str] | None = None,
                 others: Mapping[str, Runtime] | None = None) -> list[Runtime]:
    """Runtimes by name; with ``browser`` (--browser PATH), which one of them must run in."""
    chosen = [get_runtime(name, browser, others) for name in names]
    if browser is not None and not any(isinstance(rt, OrtWeb) for rt in chosen):
        in_browser = ", ".join(name for name, rt in RUNTIMES.items() if isinstance(rt, OrtWeb))
        raise PosexportError(f"--browser {browser}: none of the runtimes chosen ({', '.join(names) or 'none'}) runs in a "
                             f"browser; name one with --runtimes ({in_browser})")
    return chosen


__all__ = ["RUNTIMES", "Bound", "ModelSession", "Runtime", "Session", "SessionOptions", "get_runtime", "get_runtimes"]
