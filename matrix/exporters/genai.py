"""onnxruntime-genai's model builder on the CPU execution provider, at a precision (fp32, fp16, int4)."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path, precision: str = "fp32") -> Path:
    return exporters.genai(model, out, precision)
