"""mobius-onnx (onnxruntime's new builder): `mobius build --config DIR OUT --dtype f32`, run from
.venvs/mobius by its helper (tests/exporter_fixtures.mobius)."""

from __future__ import annotations

from pathlib import Path

from tests import exporter_fixtures


def export(model: Path, out: Path) -> Path:
    return exporter_fixtures.mobius(model, out)
