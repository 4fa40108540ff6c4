"""transformers 5's OnnxExporter with its onnxruntime CPU fusions (OnnxConfig(ort_fusions="cpu"))."""

from __future__ import annotations

from pathlib import Path

from .transformers_onnx import export as export_transformers


def export(model: Path, out: Path) -> Path:
    return export_transformers(model, out, ort_fusions="cpu")
