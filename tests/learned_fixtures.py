"""Tiny random transformers models with learned position tables (GPT-2, OPT, BERT, RoBERTa, Whisper's
decoder) and GPT-J's sin|cos table, exported by torch.onnx's TorchScript exporter (a second each; the
dynamo exporter writes the same Gathers), each made once per test session under surgery_fixtures.ROOT.
Every model has 1–2 layers, hidden 32 and a position table of LIMIT rows."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np

from .surgery_fixtures import ROOT, VOCAB

LIMIT = 32  # positions of every learned table here
AXES = {0: "batch", 1: "seq"}


def model_of(kind: str):  # noqa: ANN201
    """(the seeded torch model, the names of its inputs) of a tiny model of ``kind``."""
    import torch
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=LIMIT, pad_token_id=1)
    torch.manual_seed(0)
    if kind == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=LIMIT)), ["input_ids", "attention_mask"]
    if kind == "opt":
        config = tf.OPTConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64,
                              word_embed_proj_dim=32, max_position_embeddings=LIMIT, pad_token_id=1)
        return tf.OPTForCausalLM(config), ["input_ids", "attention_mask"]
    if kind == "bert":
        return tf.BertModel(tf.BertConfig(**common)), ["input_ids", "attention_mask"]
    if kind == "roberta":  # positions start at padding_idx + 1 = 2: the table has LIMIT + 2 rows
        return tf.RobertaModel(tf.RobertaConfig(**common | {"max_position_embeddings": LIMIT + 2})), ["input_ids", "attention_mask"]
    if kind == "gptj":
        config = tf.GPTJConfig(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, rotary_dim=8, n_positions=LIMIT)
        return tf.GPTJForCausalLM(config), ["input_ids", "attention_mask", "position_ids"]
    raise ValueError(kind)


@functools.lru_cache(maxsize=None)
def export(kind: str) -> Path:
    """ROOT/learned-KIND.onnx: the tiny model's first output (logits or hidden states) from its inputs."""
    import torch

    model, names = model_of(kind)
    model.eval()

    class First(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, *args):  # noqa: ANN002
            return self.m(**dict(zip(names, args)), use_cache=False)[0]

    example = {"input_ids": torch.randint(3, VOCAB, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.int64),
               "position_ids": torch.arange(8).expand(2, 8)}
    out = ROOT / f"learned-{kind}.onnx"
    export_module(First(), tuple(example[n] for n in names), names, out)
    return out


@functools.lru_cache(maxsize=None)
def whisper_decoder() -> Path:
    """ROOT/learned-whisper-decoder.onnx: a tiny Whisper's decoder (max_target_positions LIMIT; positions
    sliced from the table at 0 … seq − 1): decoder_input_ids, attention_mask, encoder_hidden_states -> logits."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    config = WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
                           max_source_positions=16, max_target_positions=LIMIT, pad_token_id=1, bos_token_id=1,
                           eos_token_id=2, decoder_start_token_id=1)
    model = WhisperForConditionalGeneration(config).eval()

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, decoder_input_ids, attention_mask, encoder_hidden_states):  # noqa: ANN001
            hidden = self.m.model.decoder(input_ids=decoder_input_ids, attention_mask=attention_mask,
                                          encoder_hidden_states=encoder_hidden_states, use_cache=False).last_hidden_state
            return self.m.proj_out(hidden)

    out = ROOT / "learned-whisper-decoder.onnx"
    example = (torch.randint(3, VOCAB, (2, 8)), torch.ones(2, 8, dtype=torch.int64), torch.randn(2, 16, 32))
    export_module(Decoder(), example, ["decoder_input_ids", "attention_mask", "encoder_hidden_states"], out)
    return out


@functools.lru_cache(maxsize=None)
def t5_seq2seq() -> Path:
    """ROOT/t5-seq2seq.onnx: a tiny T5 (32 buckets, max_distance 64, 2 heads; the encoder's bias
    bidirectional, the decoder's causal): input_ids, attention_mask, decoder_input_ids -> logits."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
                      relative_attention_num_buckets=32, relative_attention_max_distance=64, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, decoder_input_ids):  # noqa: ANN001
            return self.m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids, use_cache=False).logits

    out = ROOT / "t5-seq2seq.onnx"
    example = (torch.randint(3, VOCAB, (2, 8)), torch.ones(2, 8, dtype=torch.int64), torch.randint(3, VOCAB, (2, 8)))
    export_module(Logits(), example, ["input_ids", "attention_mask", "decoder_input_ids"], out)
    return out


def vit_model():  # noqa: ANN201
    """The seeded tiny ViT of vit_interpolating (weights std 0.5, so positions matter)."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64, initializer_range=0.5)
    return ViTModel(config, add_pooling_layer=False).eval()


@functools.lru_cache(maxsize=None)
def vit_interpolating() -> Path:
    """ROOT/vit-interpolate.onnx: a tiny ViT (32×32 images, patches of 8: a trained 4×4 grid and a class
    token) exported with interpolate_pos_encoding=True: pixel_values [batch, 3, height, width] -> hidden states."""
    import torch

    model = vit_model()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, pixel_values):  # noqa: ANN001
            return self.m(pixel_values=pixel_values, interpolate_pos_encoding=True).last_hidden_state

    out = ROOT / "vit-interpolate.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Hidden(), (torch.randn(1, 3, 48, 40),), str(out), dynamo=False, input_names=["pixel_values"],
                          output_names=["out"], dynamic_axes={"pixel_values": {0: "batch", 2: "height", 3: "width"}}, opset_version=18)
    return out


def export_module(module, example: tuple, names: list[str], out: Path) -> None:  # noqa: ANN001
    import torch

    own = {"encoder_hidden_states": {0: "batch", 1: "frames"}, "decoder_input_ids": {0: "batch", 1: "target"}}
    axes = {n: own.get(n, AXES) for n in names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, str(out), dynamo=False, input_names=names, output_names=["out"],
                          dynamic_axes=axes, opset_version=18)


def feeds(model: Path, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random feeds of length ``seq`` (batch 2) for one of these exports: token ids ≥ 3 (never padding),
    a mask of ones, positions 0 … seq − 1, encoder states N(0, 1) of 16 frames."""
    import onnx

    rng = np.random.default_rng(seed)
    out = {}
    for tensor in onnx.load(str(model), load_external_data=False).graph.input:
        if tensor.name.endswith("input_ids"):
            out[tensor.name] = rng.integers(3, VOCAB, (2, seq), dtype=np.int64)
        elif tensor.name == "attention_mask":
            out[tensor.name] = np.ones((2, seq), dtype=np.int64)
        elif tensor.name == "position_ids":
            out[tensor.name] = np.broadcast_to(np.arange(seq, dtype=np.int64), (2, seq)).copy()
        else:
            out[tensor.name] = rng.standard_normal((2, 16, 32)).astype(np.float32)
    return out
