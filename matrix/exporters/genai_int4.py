"""onnxruntime-genai's model builder on the CPU execution provider at int4 (caches in the model's float type at fp16;
float32 caches beside MatMulNBits weights at int4)."""

from __future__ import annotations

from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    return exporters.genai(model, out, "int4")
