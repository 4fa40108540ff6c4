"""A torch.onnx dynamo export, then onnxscript's onnxruntime fusions (optimize_for_ort)."""

from __future__ import annotations

from pathlib import Path

from tests import exporter_fixtures


def export(model: Path, out: Path) -> Path:
    return exporter_fixtures.ort_optimized(exporter_fixtures.torch_onnx(model, out / "plain.onnx"), out / "model.onnx")
