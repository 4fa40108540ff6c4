"""A Llama whose logits are large and everything else small: hidden size 64, 2 layers, tied embeddings,
seeded random weights, and a vocabulary of any size, exported by torch.onnx (TorchScript, logits only).
What model-parity's memory is measured on (tests/test_verdicts_memory.py, benchmarks/parity_memory.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

HIDDEN, LAYERS = 64, 2


def wide_vocabulary_llama(folder: Path, vocab: int, max_positions: int = 8192) -> Path:
    """The model saved in ``folder`` (config.json and weights) and its export folder/model.onnx."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(folder)

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, position_ids):  # noqa: ANN001
            return self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False).logits

    names = ["input_ids", "attention_mask", "position_ids"]
    example = (torch.randint(0, vocab, (1, 8)), torch.ones(1, 8, dtype=torch.int64), torch.arange(8)[None])
    out = folder / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Logits(), example, str(out), dynamo=False, input_names=names, output_names=["logits"],
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in names}, opset_version=18)
    return out
