"""onnxruntime-genai's model builder on the CPU execution provider at fp32."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.genai(model, out, "fp32")
