"""Tiny random transformers models in temp folders (no downloads), exported by the real exporters:
torch.onnx (dynamo, and the TorchScript exporter), onnxscript's onnxruntime fusions and onnxruntime-genai's
model builder (the exports themselves: zoo/exporters.py). Each export is made once per test
session, in a temp folder removed at exit."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import zoo
from zoo import exporters as ef


ROOT = Path(tempfile.mkdtemp(prefix="posexport-surgery-"))
atexit.register(shutil.rmtree, ROOT, ignore_errors=True)
VOCAB, TINY = zoo.VOCAB, zoo.TINY  # 2 layers, hidden 64, 4 heads of 16, 2 kv heads, vocab 100, weights std 0.3

# Rope scalings of the fixtures, as transformers' config spells them (max_position_embeddings 64 unless set).
SCALINGS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 256},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
}


def tiny_llama(name: str, scaling: str, max_positions: int = 64, base: float = 10000.0) -> Path:
    """A tiny seeded Llama with the given rope scaling, saved to a folder with a tokenizer."""
    from transformers import LlamaConfig

    return save(name, LlamaConfig(max_position_embeddings=max_positions, rope_theta=base, rope_scaling=SCALINGS[scaling], **TINY))


def tiny_llama31(name: str = "Meta-Llama-3.1-8B") -> Path:
    """The README's own model, tiny: Llama-3.1's rope (base 500000, llama3 factor 8 from 8192 of 131072 positions)."""
    from transformers import LlamaConfig

    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    return save(name, LlamaConfig(max_position_embeddings=131072, rope_theta=500000.0, rope_scaling=llama3, **TINY))


def tiny_phi3(name: str = "phi3-longrope") -> Path:
    """A tiny Phi-3 with LongRoPE (L0 64, max 256: attention factor √(1 + ln 4 / ln 64))."""
    from transformers import Phi3Config

    short, long = [1.0 + 0.1 * i for i in range(8)], [1.0 + 0.5 * i for i in range(8)]
    return save(name, Phi3Config(max_position_embeddings=256, original_max_position_embeddings=64,
                                 rope_scaling={"type": "longrope", "short_factor": short, "long_factor": long}, **TINY))


def tiny_gemma3(name: str = "gemma3") -> Path:
    """A tiny Gemma-3: sliding layers with plain rope (base 10000), full layers with linear factor 8 (base 1e6)."""
    from transformers import Gemma3TextConfig

    ropes = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
             "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}
    return save(name, Gemma3TextConfig(head_dim=16, max_position_embeddings=256, sliding_window=16,
                                       layer_types=["sliding_attention", "full_attention"], rope_parameters=ropes, **TINY))


def save(name: str, config: Any) -> Path:
    """The seeded model of ``config`` and a WordLevel tokenizer, in ROOT/name (made once)."""
    return zoo.save_model(config, ROOT / name)


def promising(folder: Path, positions: int) -> Path:
    """The same model whose config promises ``positions`` (max_position_embeddings): what doctor holds an
    export's cache rows against."""
    out = folder.with_name(f"{folder.name}-promising-{positions}")
    if not out.is_dir():
        shutil.copytree(folder, out)
        config = json.loads((out / "config.json").read_text())
        (out / "config.json").write_text(json.dumps(config | {"max_position_embeddings": positions}))
    return out


def as_plain(folder: Path) -> Path:
    """The same weights with plain rope in the config: how a dynamic-NTK model gets exported today."""
    plain = folder.with_name(folder.name + "-plain")
    if not plain.is_dir():
        plain.mkdir()
        for f in folder.iterdir():
            (plain / f.name).write_bytes(f.read_bytes())
        config = json.loads((plain / "config.json").read_text())
        config.pop("rope_scaling", None)
        config["rope_parameters"] = {"rope_type": "default", "rope_theta": config.get("rope_parameters", {}).get("rope_theta", 10000.0)}
        (plain / "config.json").write_text(json.dumps(config))
    return plain


@functools.lru_cache(maxsize=None)
def torch_export(folder: Path, position_ids: bool = True, dynamo: bool = True) -> Path:
    """torch.onnx.export of the model (dynamo, or the TorchScript exporter with axes named b and s):
    input_ids, attention_mask[, position_ids] -> logits."""
    return ef.torch_onnx(folder, folder.with_name(folder.name + ("" if dynamo else "-torchscript") + ".onnx"), dynamo, position_ids)


@functools.lru_cache(maxsize=None)
def genai_export(folder: Path, precision: str = "fp32") -> Path:
    """onnxruntime-genai's builder (``-e cpu``, fp32 unless told) of the model folder: a folder with
    model.onnx(.data), genai_config.json and the tokenizer."""
    suffix = "" if precision == "fp32" else f"-{precision}"
    return ef.genai(folder, folder.with_name(folder.name + "-genai" + suffix), precision)


def with_caches(model: Path, cos: np.ndarray, sin: np.ndarray, out: Path) -> Path:
    """A copy of a genai model whose cos_cache/sin_cache are these (in the model's own float type), written
    here without posexport: the reference a patched model is held against."""
    import onnx
    import onnx.numpy_helper as onh

    reference = onnx.load(str(model))
    for t in reference.graph.initializer:
        if t.name in ("cos_cache", "sin_cache"):
            value = cos if t.name == "cos_cache" else sin
            t.CopyFrom(onh.from_array(value.astype(onh.to_array(t).dtype), t.name))
    onnx.save_model(reference, str(out), save_as_external_data=True, location=out.name + ".data")
    return out


def llama3_inv_freq(config: dict[str, Any]) -> np.ndarray:
    """Llama-3's frequencies written out here in float64, independently of posexport's scalings."""
    rope = config["rope_parameters"]
    dim = config["head_dim"]
    theta = rope["rope_theta"] ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    factor, low, high, original = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"], rope["original_max_position_embeddings"]
    wavelength = 2 * np.pi / theta
    smooth = (original / wavelength - low) / (high - low)
    out = np.where(wavelength > original / low, theta / factor, (1 - smooth) * theta / factor + smooth * theta)
    return np.where(wavelength < original / high, theta, out)


# Stored fraction bits and the smallest normal exponent of each float type.
FLOAT_BITS = {"float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126)}


def half_ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """Half a unit in the last place of ``dtype`` around the float64 values x: the most rounding once leaves."""
    fraction, smallest = FLOAT_BITS[dtype]
    return 2.0 ** (np.floor(np.log2(np.maximum(np.abs(x), 2.0 ** smallest))) - fraction - 1)


def tiny_gpt2(name: str = "gpt2") -> Path:
    """A tiny GPT-2: a learned position table (wpe) of 128 rows."""
    from transformers import GPT2Config

    return save(name, GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128, bos_token_id=1, eos_token_id=2))


def tiny_gptj(name: str = "gptj") -> Path:
    """A tiny GPT-J (weights std 0.3): rope on the first 8 of 16 channels per head, interleaved pairs, read
    from a sin|cos table of 64 rows."""
    from transformers import GPTJConfig

    return save(name, GPTJConfig(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=64,
                                 initializer_range=0.3, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False))


def sincos_gatherelements(rows: int, base: float):  # noqa: ANN201
    """transformers 4.x's GPT-J rotary as a graph: a sin|cos table [1, rows, 8] (base ``base``, float32 of
    float64 angles) repeated per batch, then gathered with GatherElements by position_ids repeated over the
    width: position_ids [1, s] -> sincos [1, s, 8]."""
    import onnx
    import onnx.helper as oh
    import onnx.numpy_helper as onh

    angles = np.arange(rows, dtype=np.float64)[:, None] * base ** (-np.arange(0, 8, 2) / 8)
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)[None]
    nodes = [oh.make_node("Tile", ["table", "repeats"], ["tiled"]),
             oh.make_node("Unsqueeze", ["position_ids", "last"], ["unsqueezed"]),
             oh.make_node("Expand", ["unsqueezed", "shape"], ["index"]),
             oh.make_node("GatherElements", ["tiled", "index"], ["sincos"], axis=1)]
    graph = oh.make_graph(nodes, "gptj", [oh.make_tensor_value_info("position_ids", onnx.TensorProto.INT64, [1, "s"])],
                          [oh.make_tensor_value_info("sincos", onnx.TensorProto.FLOAT, None)],
                          [onh.from_array(table, "table"), onh.from_array(np.array([1, 1, 1]), "repeats"),
                           onh.from_array(np.array([-1]), "last"), onh.from_array(np.array([1, 1, 8]), "shape")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


def tiny_bloom(name: str = "bloom") -> Path:
    """A tiny BLOOM: ALiBi with 4 heads."""
    from transformers import BloomConfig

    return save(name, BloomConfig(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=2, pad_token_id=0))


@functools.lru_cache(maxsize=None)
def ort_fused(model: Path) -> Path:
    """onnxscript's onnxruntime fusions (optimize_for_ort) applied to an export."""
    return ef.ort_optimized(model, model.with_name(model.stem + "-fused.onnx"))


@functools.lru_cache(maxsize=None)
def t5_encoder_export() -> Path:
    """A tiny T5 encoder (32 buckets, 4 heads) by torch.onnx's TorchScript exporter (dynamo cannot export
    T5's attention view with dynamic shapes in torch 2.13): input_ids, attention_mask -> hidden states."""
    import torch
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    config = T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                      relative_attention_num_buckets=32, relative_attention_max_distance=128)
    model = T5EncoderModel(config).eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):  # noqa: ANN001
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    out = ROOT / "t5-encoder.onnx"
    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Hidden(), (torch.randint(0, VOCAB, (2, 8)), torch.ones(2, 8, dtype=torch.int64)), str(out), dynamo=False,
                          input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                          dynamic_axes={"input_ids": axes, "attention_mask": axes}, opset_version=18)
    return out


def default_init_llama(name: str, base: float = 10000.0, scaling: str = "default", max_positions: int = 64,
                       weights_of: Path | None = None) -> Path:
    """A tiny Llama with transformers' default initialisation (std 0.02: logits hardly move with the rope);
    ``weights_of`` copies another folder's weights under this config (the same model, its rope misread)."""
    from transformers import LlamaConfig

    config = LlamaConfig(max_position_embeddings=max_positions, rope_theta=base, rope_scaling=SCALINGS[scaling],
                         **{**TINY, "initializer_range": 0.02})
    folder = save(name, config)
    if weights_of is not None:
        (folder / "model.safetensors").write_bytes((weights_of / "model.safetensors").read_bytes())
    return folder


@functools.lru_cache(maxsize=None)
def torch_export_with_cache(folder: Path, attention_factor_times: int = 1) -> Path:
    """The TorchScript export of a prompt step returning logits and every layer's present key and value
    (present.L.key / present.L.value, [batch, kv_heads, seq, head_dim]). ``attention_factor_times`` 2
    applies the rotary attention factor twice, as a faulty exporter would."""
    import torch
    from transformers import AutoModelForCausalLM

    out = folder.with_name(f"{folder.name}-cache-x{attention_factor_times}.onnx")
    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    if attention_factor_times != 1:
        rotary = model.model.rotary_emb
        rotary.attention_scaling = rotary.attention_scaling ** attention_factor_times
    layers = model.config.num_hidden_layers

    class WithCache(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, position_ids):  # noqa: ANN001
            result = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=True)
            cache = [t for layer in result.past_key_values.layers for t in (layer.keys, layer.values)]
            return (result.logits, *cache)

    names = ["input_ids", "attention_mask", "position_ids"]
    outputs = ["logits", *(f"present.{n}.{kind}" for n in range(layers) for kind in ("key", "value"))]
    axes = {n: {0: "batch", 1: "seq"} for n in names} | {n: {0: "batch", 2: "seq"} for n in outputs[1:]}
    example = (torch.randint(0, VOCAB, (1, 8)), torch.ones(1, 8, dtype=torch.int64), torch.arange(8)[None])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(WithCache(), example, str(out), dynamo=False, input_names=names, output_names=outputs,
                          dynamic_axes=axes, opset_version=18)
    return out
