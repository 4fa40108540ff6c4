"""PyTorch eager: the encoding's torch module run directly, no ONNX involved. torch is imported when a
session is made, so that importing the runtimes (as the fork server of posexport.runtimes.isolated does)
does not cost torch's import."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..contract import Artifact
from ..dtypes import from_torch, to_torch
from .base import Bound, Runtime, Session, SessionOptions


class TorchSession(Session):
    def __init__(self, artifact: Artifact):
        self.module = artifact.encoding.torch_module(artifact.params, artifact.options).eval()
        self.names = [s.name for s in artifact.encoding.inputs(artifact.params)]

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.no_grad():
            return from_torch(self.module(*(to_torch(feeds[n]) for n in self.names)))

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Bound:
        """The inputs become tensors once; each call runs the module on them."""
        import torch

        tensors = [to_torch(feeds[n]) for n in self.names]
        last: list[torch.Tensor] = []

        def call() -> None:
            with torch.no_grad():
                last[:] = [self.module(*tensors)]

        return Bound(call, lambda: [from_torch(t) for t in last])


class TorchEager(Runtime):
    name = "torch"
    description = "PyTorch eager module (the same maths, before export; it does not run the ONNX graph)"
    runs_graphs = False

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        if artifact.encoding is None:
            return False, "a bare ONNX graph has no torch module to run"
        return True, ""

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> TorchSession:
        import torch

        if options.threads:
            torch.set_num_threads(options.threads)  # process-wide in torch: the last session's count holds
        return TorchSession(artifact)
