"""transformers 5's own exporter (transformers.exporters.OnnxExporter, OnnxConfig(dynamic=True)), no cache."""

from __future__ import annotations

from pathlib import Path

from tests import exporter_fixtures


def export(model: Path, out: Path) -> Path:
    return exporter_fixtures.transformers_onnx(model, out)
