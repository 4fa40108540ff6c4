"""PyTorch eager: the encoding's torch module run directly, no ONNX involved."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from ..contract import Artifact


class TorchSession:
    def __init__(self, artifact: Artifact):
        self.artifact = artifact
        self.module = artifact.encoding.torch_module(artifact.params, artifact.options).eval()
        self.names = [s.name for s in artifact.encoding.inputs(artifact.params)]
        self.dtype = artifact.options.dtype

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        if array.dtype.name == "bfloat16":
            return torch.from_numpy(array.view(np.uint16).astype(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(array))

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            y = self.module(*(self.tensor(feeds[n]) for n in self.names))
        if y.dtype == torch.bfloat16:
            return y.view(torch.int16).numpy().view(np.uint16).view(self.dtype.numpy)
        return y.numpy()


class TorchEager:
    name = "torch"
    description = "PyTorch eager module (the same maths, before export; it does not run the ONNX graph)"
    limitations: dict[str, str] = {}

    def available(self) -> tuple[bool, str]:
        return True, ""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        return True, ""

    def caveats(self, artifact: Artifact) -> str:
        return ""

    def load(self, artifact: Artifact) -> TorchSession:
        return TorchSession(artifact)
