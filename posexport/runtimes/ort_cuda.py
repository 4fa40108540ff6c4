"""onnxruntime-gpu on the CUDA execution provider, strict: no silent CPU fallback.

The session is created with the CUDA provider alone and with ``session.disable_cpu_ep_fallback``, so a
node that the CUDA provider cannot run is a load error naming the node instead of a quiet CPU kernel
(whose numerics are not the ones being deployed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TypeVar

from ..contract import Artifact
from .base import Runtime, SessionOptions
from .ort import OrtModelSession, OrtSession

S = TypeVar("S", OrtSession, OrtModelSession)

STRICT = {"session.disable_cpu_ep_fallback": "1"}


class OrtCuda(Runtime):
    name = "ort-cuda"
    description = "onnxruntime-gpu, CUDA execution provider only, CPU fallback disabled"
    device = "cuda"

    def available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("onnxruntime") is None:
            return False, "onnxruntime is not installed (pip install 'posexport[gpu]')"
        import onnxruntime as ort

        providers = ort.get_available_providers()
        if "CUDAExecutionProvider" not in providers:
            return False, (
                f"this onnxruntime has no CUDAExecutionProvider (it has {', '.join(providers)}); "
                "install onnxruntime-gpu (pip install 'posexport[gpu]') on a machine with an NVIDIA GPU"
            )
        return True, ""

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> OrtSession:
        return on_cuda(OrtSession(artifact, ["CUDAExecutionProvider"], optimize=True, options=options, config=STRICT))

    def supports_model(self, path: Path) -> tuple[bool, str]:
        return True, ""

    def load_model(self, path: Path, options: SessionOptions = SessionOptions()) -> OrtModelSession:
        return on_cuda(OrtModelSession(path, ["CUDAExecutionProvider"], optimize=True, options=options, config=STRICT))


def on_cuda(session: S) -> S:
    """The session, once onnxruntime says it runs on CUDA (never a quiet CPU session)."""
    used = session.session.get_providers()
    if used[:1] != ["CUDAExecutionProvider"]:
        raise RuntimeError(f"onnxruntime did not create a CUDA session (providers in use: {', '.join(used)})")
    return session
