"""torch.onnx.export with the TorchScript exporter (dynamo=False, opset 18), logits only."""

from __future__ import annotations

from pathlib import Path

from .logits import export as export_logits


def export(model: Path, out: Path) -> Path:
    return export_logits(model, out, dynamo=False)
