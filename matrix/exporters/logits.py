"""What the torch.onnx exporters trace: the causal LM's logits from input_ids, attention_mask and
position_ids (no cache), with batch and sequence dynamic."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def traced(model_dir: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any) -> Any:
            return self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False).logits

    return Logits()


NAMES = ["input_ids", "attention_mask", "position_ids"]


def example() -> tuple[Any, ...]:
    import torch

    torch.manual_seed(0)
    return torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64), torch.arange(8).expand(2, 8)


def export(model_dir: Path, out: Path, dynamo: bool) -> Path:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.onnx"
    if dynamo:
        batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
        axes: dict[str, Any] = {"dynamic_shapes": {n: {0: batch, 1: seq} for n in NAMES}}
    else:
        axes = {"dynamic_axes": {n: {0: "batch", 1: "seq"} for n in NAMES}, "opset_version": 18}
    torch.onnx.export(traced(model_dir), example(), str(path), dynamo=dynamo, input_names=NAMES, output_names=["logits"],
                      verbose=False, **axes)
    return path
