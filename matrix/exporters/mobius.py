"""mobius-onnx (onnxruntime's new builder): `mobius build --config DIR OUT --dtype f32`, run from
.venvs/mobius by its helper (tests/exporters.mobius)."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.mobius(model, out)
