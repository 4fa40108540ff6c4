"""onnxruntime-genai's model builder, fp32 on the CPU execution provider."""

from __future__ import annotations

import sys
from pathlib import Path

from .tool import run_tool


def export(model: Path, out: Path) -> Path:
    run_tool([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(model), "-o", str(out),
              "-p", "fp32", "-e", "cpu", "-c", str(out.with_name(out.name + "-cache"))])
    return out / "model.onnx"
