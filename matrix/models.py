"""Tiny random models, one per architecture row of the matrix, saved the way a user has them (weights,
config.json written by transformers 5, a word-level tokenizer). Configs are given in transformers 4.x
spelling (``rope_theta``, ``rope_scaling``): transformers 5 reads it, and so does an exporter pinned to 4.x.
Every model trains at ``max_position_embeddings`` 64 (or its ``original_max_position_embeddings``), so that
parity past the trained length stays a short prompt."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zoo

# The exporters' tiny causal LMs (zoo.TINY: 2 layers, hidden 64, 4 heads of 16, 2 kv heads, weights large enough that
# logits depend on positions), trained at 64 positions. No rope_theta here: each architecture keeps its own default
# and its own key (GPT-NeoX says rotary_emb_base).
TINY: dict[str, Any] = {**zoo.TINY, "max_position_embeddings": 64}
PHI_SHORT = [1.0 + 0.1 * i for i in range(8)]


@dataclass(frozen=True)
class Architecture:
    """A matrix row: the config (4.x spelling), the trained length and the prompt lengths checked."""

    name: str
    config: dict[str, Any]

    @property
    def trained(self) -> int:
        scaling = self.config.get("rope_scaling") or {}
        return int(scaling.get("original_max_position_embeddings") or self.config.get("original_max_position_embeddings")
                   or self.config["max_position_embeddings"])

    @property
    def prompts(self) -> tuple[int, int]:
        """One prompt inside the trained length, one past every length the config names."""
        return self.trained // 2, 2 * int(self.config["max_position_embeddings"]) + 8


def arch(name: str, model_type: str, without: tuple[str, ...] = (), **changes: Any) -> Architecture:
    """The row's config: TINY with its changes, less the keys its architecture does not have (``without``)."""
    return Architecture(name, {k: v for k, v in {"model_type": model_type, **TINY, **changes}.items() if k not in without})


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    arch("llama", "llama"),
    arch("phi3-longrope", "phi3", max_position_embeddings=256, original_max_position_embeddings=64,
         rope_scaling={"type": "longrope", "short_factor": PHI_SHORT, "long_factor": [2 * f for f in PHI_SHORT]}),
    arch("qwen2-yarn", "qwen2", rope_theta=1000000.0,
         rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
    # GPT-NeoX has no grouped kv heads: a num_key_value_heads key, which transformers ignores, made mobius-onnx
    # declare past key/values of 2 heads for attention over 4.
    arch("gpt-neox", "gpt_neox", without=("num_key_value_heads",), rotary_pct=0.25, rotary_emb_base=10000, use_parallel_residual=True),
    arch("gemma3", "gemma3_text", head_dim=16, sliding_window=16, layer_types=["sliding_attention", "full_attention"],
         rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 8.0}),
    arch("llama3", "llama", rope_theta=500000.0, max_position_embeddings=256,
         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 32}),
    arch("mistral", "mistral", rope_theta=1000000.0, sliding_window=None),
    arch("qwen3", "qwen3", head_dim=16, rope_theta=1000000.0),
    arch("gemma2", "gemma2", head_dim=16, sliding_window=16),
    arch("stablelm", "stablelm", partial_rotary_factor=0.25),
    arch("glm4", "glm4", head_dim=16),
    arch("falcon", "falcon", new_decoder_architecture=True, num_kv_heads=2),
)}


def as_transformers5(config: dict[str, Any]) -> Any:
    """The transformers 5 config object of a 4.x-spelled config dict."""
    from transformers import AutoConfig

    values = copy.deepcopy(config)  # transformers 5 rewrites rope_scaling in place into its own spelling
    return AutoConfig.for_model(values.pop("model_type"), **values)


def build(architecture: Architecture, root: Path) -> Path:
    """The seeded tiny model of ``architecture`` with a tokenizer, in root/name (made once)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    folder = root / architecture.name
    if (folder / "model.safetensors").is_file():
        return folder
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(as_transformers5(architecture.config)).eval().save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(zoo.VOCAB)}, unk_token="t3"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="t1", eos_token="t2", pad_token="t0",
                            unk_token="t3").save_pretrained(folder)
    write_4x(architecture, folder)
    return folder


def write_4x(architecture: Architecture, folder: Path) -> None:
    """config.4x.json: the same model's config as transformers 4.x reads it (for exporters pinned to 4.x)."""
    (folder / "config.4x.json").write_text(json.dumps({**architecture.config, "architectures": [
        json.loads((folder / "config.json").read_text())["architectures"][0]], "torch_dtype": "float32"}, indent=2))
