"""transformers 5's OnnxExporter with its onnxruntime CPU fusions (OnnxConfig(ort_fusions="cpu"))."""

from __future__ import annotations

from pathlib import Path

from tests import exporter_fixtures


def export(model: Path, out: Path) -> Path:
    return exporter_fixtures.transformers_onnx(model, out, "cpu")
