"""torch.onnx.export with the TorchScript exporter (dynamo=False, opset 18), logits only."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.torch_onnx(model, out / "model.onnx", dynamo=False)
