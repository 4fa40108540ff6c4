"""torch.onnx.export with the dynamo exporter, logits only (tests/exporters.torch_onnx)."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.torch_onnx(model, out / "model.onnx")
