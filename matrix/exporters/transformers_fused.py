"""transformers 5's OnnxExporter with its onnxruntime CPU fusions (OnnxConfig(ort_fusions="cpu"))."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.transformers_onnx(model, out, "cpu")
