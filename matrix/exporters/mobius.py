"""mobius-onnx (onnxruntime's new builder): `mobius build --config DIR OUT --dtype f32`, in .venvs/mobius."""

from __future__ import annotations

from pathlib import Path

from .tool import only_onnx, run_tool, script


def export(model: Path, out: Path) -> Path:
    run_tool([script("mobius"), "build", "--config", str(model), str(out), "--dtype", "f32"])
    return only_onnx(out)
