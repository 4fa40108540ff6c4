"""transformers 5's own exporter (transformers.exporters.OnnxExporter, dynamic shapes), no cache."""

from __future__ import annotations

from pathlib import Path


def export(model: Path, out: Path, ort_fusions: str | None = None) -> Path:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.exporters import OnnxConfig, OnnxExporter

    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_pretrained(str(model)).eval()
    ids = torch.randint(0, 100, (1, 8))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": torch.arange(8)[None], "use_cache": False}
    OnnxExporter().export(hf, inputs, OnnxConfig(dynamic=True, ort_fusions=ort_fusions)).save_pretrained(out)
    return out / "model.onnx"
