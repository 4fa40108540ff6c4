"""A torch.onnx dynamo export, then onnxscript's onnxruntime fusions (optimize_for_ort)."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.ort_optimized(exporters.torch_onnx(model, out / "plain.onnx"), out / "model.onnx")
