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


# Where configs say how many positions a model has (learned tables: GPT-2's n_positions, Whisper's decoder's
# max_target_positions).
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_target_positions")


@dataclass(frozen=True)
class Architecture:
    """A matrix row: the config (4.x spelling), the trained length and the prompt lengths checked; the transformers
    auto class it is built with, and, for a row no exporter of the matrix takes whole, the exporters that do
    (None: every one) and why the others' cells are not judged."""

    name: str
    config: dict[str, Any]
    builds: str = "AutoModelForCausalLM"
    exporters: tuple[str, ...] | None = None
    not_judged: str = ""

    @property
    def positions(self) -> int:
        # T5's relative bias names no length: the rows' 64 then
        return int(next((self.config[k] for k in LENGTH_KEYS if k in self.config), TINY["max_position_embeddings"]))

    @property
    def trained(self) -> int:
        scaling = self.config.get("rope_scaling") or {}
        return int(scaling.get("original_max_position_embeddings") or self.config.get("original_max_position_embeddings")
                   or self.positions)

    @property
    def prompts(self) -> tuple[int, int]:
        """One prompt inside the trained length, one past every length the config names."""
        return self.trained // 2, 2 * self.positions + 8

    def judged_by(self, exporter: str) -> bool:
        return self.exporters is None or exporter in self.exporters


def arch(name: str, model_type: str, without: tuple[str, ...] = (), **changes: Any) -> Architecture:
    """The row's config: TINY with its changes, less the keys its architecture does not have (``without``)."""
    return Architecture(name, {k: v for k, v in {"model_type": model_type, **TINY, **changes}.items() if k not in without})


def other(name: str, config: dict[str, Any], builds: str, exporters: tuple[str, ...], why: str) -> Architecture:
    """A row that is not a rope causal LM of TINY's shape: its own config, its auto class, the exporters that take it."""
    return Architecture(name, {**config, "vocab_size": zoo.VOCAB, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
                        builds, exporters, why)


GPT2 = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64, "initializer_range": 0.3}
WHISPER = {"model_type": "whisper", "d_model": 64, "encoder_layers": 1, "decoder_layers": 2, "encoder_attention_heads": 4,
           "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "num_mel_bins": 8,
           "max_source_positions": 16, "max_target_positions": 64, "decoder_start_token_id": 1}
T5 = {"model_type": "t5", "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4, "decoder_start_token_id": 0}
BERT = {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
        "max_position_embeddings": 64}
CAUSAL_ONLY = "the matrix's exporters are run for text generation (a causal LM's logits)"


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
    arch("qwen2", "qwen2", rope_theta=1000000.0),
    other("gpt2", GPT2, "AutoModelForCausalLM", None, ""),
    other("whisper", WHISPER, "AutoModelForSpeechSeq2Seq", ("genai",),
          f"{CAUSAL_ONLY}, and of these only onnxruntime-genai's builder takes Whisper (its decoder is judged)"),
    other("t5", T5, "AutoModelForSeq2SeqLM", (), f"{CAUSAL_ONLY}; T5 is an encoder-decoder: its relative bias is exported "
          "and patched in tests/test_surgery_t5.py"),
    other("bert", BERT, "AutoModel", (), f"{CAUSAL_ONLY}; BERT is an encoder: its learned table is exported and grown "
          "in tests/test_surgery_learned.py"),
)}


def as_transformers5(config: dict[str, Any]) -> Any:
    """The transformers 5 config object of a 4.x-spelled config dict."""
    from transformers import AutoConfig

    values = copy.deepcopy(config)  # transformers 5 rewrites rope_scaling in place into its own spelling
    return AutoConfig.for_model(values.pop("model_type"), **values)


def build(architecture: Architecture, root: Path) -> Path:
    """The seeded tiny model of ``architecture`` with a tokenizer, in root/name (made once)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder = root / architecture.name
    if (folder / "model.safetensors").is_file():
        return folder
    torch.manual_seed(0)
    builder = getattr(transformers, architecture.builds)
    builder.from_config(as_transformers5(architecture.config)).eval().save_pretrained(folder)
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
