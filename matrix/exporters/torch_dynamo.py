"""torch.onnx.export with the dynamo exporter, logits only (tests/exporter_fixtures.torch_onnx)."""

from __future__ import annotations

from pathlib import Path

from tests import exporter_fixtures


def export(model: Path, out: Path) -> Path:
    return exporter_fixtures.torch_onnx(model, out / "model.onnx")
