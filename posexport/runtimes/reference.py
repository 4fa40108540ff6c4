"""onnx's ReferenceEvaluator: the ONNX specification executed in numpy (single-threaded; no options)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..contract import Artifact
from .base import ModelSession, Runtime, Session, SessionOptions, domains


class ReferenceSession(Session):
    def __init__(self, artifact: Artifact):
        from onnx.reference import ReferenceEvaluator

        self.evaluator = ReferenceEvaluator(artifact.model)
        self.dtype = artifact.options.dtype.numpy

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        out = self.evaluator.run(None, dict(feeds))[0]
        return np.asarray(out).astype(self.dtype, copy=False)


class ReferenceModelSession(ModelSession):
    def __init__(self, path: Path):
        from onnx.reference import ReferenceEvaluator

        self.evaluator = ReferenceEvaluator(str(path))

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.evaluator.output_names, self.evaluator.run(None, dict(feeds))))


class Reference(Runtime):
    name = "reference"
    description = "onnx.reference.ReferenceEvaluator (the ONNX spec in numpy)"

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        if "com.microsoft" in domains(artifact.model):
            return False, "the reference evaluator has no com.microsoft contrib ops"
        return True, ""

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> ReferenceSession:
        return ReferenceSession(artifact)

    def supports_model(self, path: Path) -> tuple[bool, str]:
        import onnx

        if "com.microsoft" in domains(onnx.load(str(path), load_external_data=False)):
            return False, "the reference evaluator has no com.microsoft contrib ops, which this model uses"
        return True, ""

    def load_model(self, path: Path, options: SessionOptions = SessionOptions()) -> ReferenceModelSession:
        return ReferenceModelSession(path)
