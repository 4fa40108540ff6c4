"""transformers 5's own exporter (transformers.exporters.OnnxExporter, OnnxConfig(dynamic=True)), no cache."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.transformers_onnx(model, out)
