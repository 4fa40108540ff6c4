"""onnx's ReferenceEvaluator: the ONNX specification executed in numpy."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..contract import Artifact
from .base import domains


class ReferenceSession:
    def __init__(self, artifact: Artifact):
        from onnx.reference import ReferenceEvaluator

        self.evaluator = ReferenceEvaluator(artifact.model)
        self.dtype = artifact.options.dtype.numpy

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        (out,) = self.evaluator.run(None, dict(feeds))
        return np.asarray(out).astype(self.dtype, copy=False)


class Reference:
    name = "reference"
    description = "onnx.reference.ReferenceEvaluator (the ONNX spec in numpy)"
    limitations: dict[str, str] = {}

    def available(self) -> tuple[bool, str]:
        return True, ""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        if "com.microsoft" in domains(artifact.model):
            return False, "the reference evaluator has no com.microsoft contrib ops"
        return True, ""

    def caveats(self, artifact: Artifact) -> str:
        return ""

    def load(self, artifact: Artifact) -> ReferenceSession:
        return ReferenceSession(artifact)
