"""Decoders (and a few encoders) whose rope transformers computes with one `<Prefix>RotaryEmbedding` class
and the module's `apply_rotary_pos_emb`: one line each in DECODERS, read from config.json as transformers
reads it (rope_values: rope_parameters or rope_scaling, rope_theta and partial_rotary_factor).

What a line says, beyond the transformers module and class prefix: the defaults transformers' config class
takes when a key is absent (max_position_embeddings, rope_theta, head_dim — None: hidden_size //
num_attention_heads — and partial_rotary_factor), the pair layout its apply function rotates (`half`,
or `interleaved` pairs (2i, 2i+1) for Cohere, ERNIE 4.5, Helium …), whether the rope is in a multimodal
config's `text_config`, and which layers skip rope:

- NO_ROPE_LAYERS (SmolLM3): `no_rope_layers[i]` is 1 where layer i rotates, 0 for a NoPE layer (default:
  every `no_rope_layer_interval`-th layer, 4, is NoPE);
- SLIDING_ONLY (Cohere2): only sliding-window layers rotate, and only when `sliding_window` is set;
- GLOBAL_NOPE (EXAONE-4): with `sliding_window` set, full-attention layers are NoPE;
- CROSS_ATTENTION (Mllama's text model): the `cross_attention_layers` (default 3, 8, 13, … 38) attend to
  the vision states without rope, the others self-attend with it;
- LINEAR_HYBRID (OLMo-Hybrid): only full_attention layers rotate; without `layer_types` every 4th layer is
  full attention and the rest linear_attention (the last layer full when none is);
- SLIDING_ROPE (Kolibri-1.1, Ergo): only sliding_attention layers rotate, whatever `sliding_window` says (the
  indexed_attention or full_attention layers are NoPE).

Without `layer_types`, a line's `every` says which layers its config class makes global: every n-th layer is
the named type (n from the named config key, or the line's default), the others slide (Kolibri-1: every 5th
full_attention; Ergo: every global_attention_every_n_layers-th). Ergo's flat rope block is its sliding layers'
(`flat_block_type`), as its config class converts it.

Per-layer rope bases, `layer_rope_theta` (0: a NoPE layer):

- PER_THETA (Granite-SWA): one rotary module per distinct non-zero base, each layer rotating with its own
  (one role per base, `rope-theta<base>`; default: rope_theta on every layer);
- ZERO_NOPE (MuSE-Spark, MuSE-Glimmer): the entries only mark NoPE layers; every other layer rotates with
  the one rotary module at rope_theta, whatever its entry says (default: NoPE on every 4th layer counted
  back from the last).

Molmo2's `rope_scaling_layers` (default every layer) take the block's scaled rope (`rope-scaled`); its
other layers an unscaled rotary at the same rope_theta (`rope-unscaled`, transformers' scaled=False).

Dory's released config.json lists each layer as an (attention, mlp) pair of blocks in `layer_types`, with
num_hidden_layers counting blocks: read halved, as its config class does; its recurrent layers run
n_recurrent_loops times on the same positions (the same rope per layer).

`linear_attention` layers (gated delta nets: OLMo-Hybrid, Qwen3-Next) never rotate. JetMoE's heads are
`kv_channels` wide, num_key_value_heads × num_experts_per_tok of them (its config computes
num_attention_heads so).

`rope_parameters` keyed by layer type (OLMo-3, ModernBERT, …) gives one role per type, named as Gemma-3's
(`rope-local` for sliding_attention, `rope-global` for full_attention, `rope-<type>` otherwise).
Ministral-3's `llama_4_scaling_beta` in the rope block adds a query-scale role on every layer:
q · (1 + β·ln(1 + ⌊p / original_max_position_embeddings⌋)).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family, Lookup
from .hf_code import torch_float
from .plan import LINEAR_ATTENTION, Role, softmax_attention
from .recipes import Recipe
from .rope_family import LAYER_ROLES, heads_and_dim, hf_rope, rope_role, text_part
from .rope_reading import rope_values

NO_ROPE_LAYERS, SLIDING_ONLY, GLOBAL_NOPE = "no_rope_layers", "sliding_only", "global_nope"
CROSS_ATTENTION, LINEAR_HYBRID, SLIDING_ROPE = "cross_attention", "linear_hybrid", "sliding_rope"
PER_THETA, ZERO_NOPE = "per_theta", "zero_nope"
SLIDING = "sliding_attention"
# Keys of attention masking and layer kinds: they choose keys, never positions.
MASKING = ("use_sliding_window", "sliding_window", "max_window_layers", "sliding_window_pattern",
           "_sliding_window_pattern", "no_rope_layer_interval")
QUERY_SCALE = "llama_4_scaling_beta"


@dataclass(frozen=True)
class D:
    module: str  # transformers.models.<module>.modeling_<module>
    prefix: str  # <prefix>RotaryEmbedding
    max_positions: int | None  # None: the config class has no default (the key is required)
    theta: float | dict[str, float]  # per layer type for rope_parameters keyed by layer type
    head_dim: int | None = None
    partial: float | None = None
    pair_layout: str = "half"
    text: bool = False
    nope: str = ""
    single_apply: bool = False  # its apply_rotary_pos_emb rotates one tensor (Gemma-3n)
    split: bool = False  # its attention hands apply only the leading rotary channels (Phi, Persimmon)
    kv_channels: bool = False  # heads sized by kv_channels (JetMoE)
    layer_theta: str = ""  # PER_THETA or ZERO_NOPE: how layer_rope_theta is read
    theta_without_block: float | None = None  # rope_theta its config class sets when rope_parameters is absent
    scaling_layers: bool = False  # rope_scaling_layers choose the scaled rope, the others an unscaled one (Molmo2)
    paired_blocks: bool = False  # layer_types may list (attention, mlp) block pairs (Dory)
    # Without layer_types: (config key or "", the global layers' type, default n): every n-th layer is global
    every: tuple[str, str, int] | None = None
    flat_block_type: str = ""  # a flat rope block is this layer type's only (Ergo: sliding_attention)
    # The rope block its config class fills in when config.json writes none, where that is more than plain rope at
    # the line's base and partial factor (GPT-OSS's yarn, Apertus's llama3, OLMo-3's block per layer type)
    block: dict[str, Any] | None = None


def plain_block(theta: float, partial: float | None = None) -> dict[str, Any]:
    return {"rope_type": "default", "rope_theta": theta, **({} if partial is None else {"partial_rotary_factor": partial})}


def llama3_block(theta: float, factor: float, original: int, low: float, high: float) -> dict[str, Any]:
    return {"rope_type": "llama3", "rope_theta": theta, "factor": factor, "original_max_position_embeddings": original,
            "low_freq_factor": low, "high_freq_factor": high}


def yarn_block(theta: float, factor: float, original: int) -> dict[str, Any]:
    return {"rope_type": "yarn", "rope_theta": theta, "factor": factor, "original_max_position_embeddings": original,
            "beta_fast": 32.0, "beta_slow": 1.0}


APERTUS_LLAMA3 = llama3_block(12000000.0, 8.0, 8192, 1.0, 4.0)
GPT_OSS_YARN = {**yarn_block(150000.0, 32.0, 4096), "truncate": False}


DECODERS: dict[str, D] = {
    "EvollaModel": D("evolla", "Evolla", 8192, 500000.0, None, None, "half"),
    "afmoe": D("afmoe", "Afmoe", 16384, 10000.0, 128, None, "half"),
    "apertus": D("apertus", "Apertus", 65536, 12000000.0, None, None, "half", block=APERTUS_LLAMA3),
    "apertus1p5_text": D("apertus1p5", "Apertus1p5Text", 65536, 12000000.0, None, None, "half", block=APERTUS_LLAMA3),
    "arcee": D("arcee", "Arcee", 4096, 10000.0, None, None, "half"),
    "aria": D("aria", "AriaText", 2048, 10000.0, None, None, "half", text=True),
    "aria_text": D("aria", "AriaText", 2048, 10000.0, None, None, "half"),
    "bamba": D("bamba", "Bamba", 262144, 10000.0, None, 0.5, "half"),
    "bitnet": D("bitnet", "BitNet", 2048, 500000.0, None, None, "half"),
    "blt_global_transformer": D("blt", "Blt", 4096, 500000.0, None, None, "interleaved"),
    "blt_local_decoder": D("blt", "Blt", 24576, 500000.0, None, None, "interleaved"),
    "blt_local_encoder": D("blt", "Blt", 24576, 500000.0, None, None, "interleaved"),
    "blt_patcher": D("blt", "Blt", 8192, 10000.0, None, None, "interleaved"),
    "chameleon": D("chameleon", "Chameleon", 4096, 10000.0, None, None, "half"),
    "cohere": D("cohere", "Cohere", 8192, 500000.0, None, None, "interleaved"),
    "cohere2": D("cohere2", "Cohere2", 8192, 10000.0, None, None, "interleaved", nope=SLIDING_ONLY),
    "csm": D("csm", "Csm", 2048, 500000.0, None, None, "half"),
    "csm_depth_decoder_model": D("csm", "Csm", 33, 500000.0, None, None, "half"),
    "cwm": D("cwm", "Cwm", 131072, 1000000.0, 128, None, "half", block=llama3_block(1000000.0, 16.0, 8192, 1.0, 4.0)),
    "deepseek_ocr2": D("deepseek_ocr2", "DeepseekOcr2Text", 2048, 10000.0, None, None, "half", text=True),
    "deepseek_ocr2_encoder": D("deepseek_ocr2", "DeepseekOcr2Text", 32768, 10000.0, None, None, "half"),
    "deepseek_ocr2_text": D("deepseek_ocr2", "DeepseekOcr2Text", 2048, 10000.0, None, None, "half"),
    "dia_decoder": D("dia", "Dia", 3072, 10000.0, 128, None, "half"),
    "dia_encoder": D("dia", "Dia", 1024, 10000.0, 128, None, "half"),
    "diffllama": D("diffllama", "DiffLlama", 2048, 10000.0, None, None, "half"),
    "dory": D("dory", "Dory", 8192, {"full_attention": 10000000.0, SLIDING: 10000.0}, 256, paired_blocks=True),
    "doge": D("doge", "Doge", 2048, 10000.0, None, None, "half"),
    "dots1": D("dots1", "Dots1", 2048, 10000.0, None, None, "half"),
    "emu3": D("emu3", "Emu3", 9216, 1000000.0, None, None, "half", text=True),
    "emu3_text_model": D("emu3", "Emu3", 9216, 1000000.0, None, None, "half"),
    "ernie4_5": D("ernie4_5", "Ernie4_5", 131072, 500000.0, 128, None, "interleaved"),
    "ernie4_5_moe": D("ernie4_5_moe", "Ernie4_5_Moe", 131072, 500000.0, None, None, "interleaved"),
    "esmc": D("esmc", "Esmc", 2048, 10000.0, None, None, "half"),
    "eurobert": D("eurobert", "EuroBert", 8192, 10000.0, None, None, "half"),
    "evolla": D("evolla", "Evolla", 8192, 500000.0, None, None, "half"),
    "exaone4": D("exaone4", "Exaone4", 2048, 10000.0, None, None, "half", nope=GLOBAL_NOPE),
    "exaone_moe": D("exaone_moe", "ExaoneMoe", 2048, 10000.0, None, None, "half", nope=GLOBAL_NOPE),
    "falcon_h1": D("falcon_h1", "FalconH1", 8192, 10000.0, None, None, "half"),
    "flex_olmo": D("flex_olmo", "FlexOlmo", 4096, 500000.0, None, None, "half"),
    "glm4_moe": D("glm4_moe", "Glm4Moe", 131072, 10000.0, None, 0.5, "half"),
    "glmasr": D("glmasr", "GlmAsr", 2048, 10000.0, None, None, "half", text=True),
    "glmasr_encoder": D("glmasr", "GlmAsr", 1500, 10000.0, None, 0.5, "half"),
    "gpt_neox_japanese": D("gpt_neox_japanese", "GPTNeoXJapanese", 2048, 10000.0, None, None, "half"),
    "gpt_oss": D("gpt_oss", "GptOss", 131072, 150000.0, 64, None, "half", block=GPT_OSS_YARN),
    "granite": D("granite", "Granite", 2048, 10000.0, None, None, "half"),
    "granite4_vision": D("granite4_vision", "Granite4VisionText", 2048, 10000.0, None, None, "half", text=True),
    "granite4_vision_text": D("granite4_vision", "Granite4VisionText", 2048, 10000.0, None, None, "half"),
    "granite_docling_text": D("granite_docling", "GraniteDoclingText", 32768, 10000.0, None, None, "half"),
    "granite_swa": D("granite_swa", "GraniteSWA", 8192, 10000.0, layer_theta=PER_THETA),
    "granitemoe_swa": D("granitemoe_swa", "GraniteMoeSWA", 2048, 10000.0, layer_theta=PER_THETA),
    "granitemoe": D("granitemoe", "GraniteMoe", 2048, 10000.0, None, None, "half"),
    "granitemoehybrid": D("granitemoehybrid", "GraniteMoeHybrid", 2048, 10000.0, None, None, "half"),
    "granitemoeshared": D("granitemoeshared", "GraniteMoeShared", 2048, 10000.0, None, None, "half"),
    "gte": D("gte", "Gte", 8192, 160000.0, None, None, "half"),
    "helium": D("helium", "Helium", 4096, 100000.0, 128, None, "interleaved"),
    "higgs_audio_v2": D("higgs_audio_v2", "HiggsAudioV2", 2048, 10000.0, 128, None, "half",
                        block=llama3_block(500000.0, 32.0, 1024, 0.125, 0.5)),
    "hrm_text": D("hrm_text", "HrmText", 2048, 10000.0, 128, None, "half"),
    "hunyuan_v1_dense": D("hunyuan_v1_dense", "HunYuanDenseV1", 2048, 10000.0, None, None, "half"),
    "hunyuan_v1_moe": D("hunyuan_v1_moe", "HunYuanMoEV1", 2048, 10000.0, None, None, "half"),
    "hy_v3": D("hy_v3", "HYV3", 131072, 11158840.0, 128, None, "half"),
    "hyperclovax": D("hyperclovax", "HyperCLOVAX", 2048, 10000.0, None, None, "half"),
    "idefics": D("idefics", "Idefics", 2048, 10000.0, None, None, "half"),
    "jetmoe": D("jetmoe", "JetMoe", 4096, 10000.0, kv_channels=True),
    "jais2": D("jais2", "Jais2", 8192, 10000.0, None, None, "half"),
    "jina_embeddings_v3": D("jina_embeddings_v3", "JinaEmbeddingsV3", 8194, 20000.0, None, None, "half"),
    "kolibri1": D("kolibri1", "Kolibri1", 262144, 10000.0, 128, None, "half", nope=GLOBAL_NOPE,
                  every=("", "full_attention", 5)),
    "kolibri1_1": D("kolibri1_1", "Kolibri1_1", 262144, 10000.0, 128, nope=SLIDING_ROPE,
                    every=("", "indexed_attention", 5)),
    "ergo": D("ergo", "Ergo", 524288, 1000000.0, None, None, "interleaved", nope=SLIDING_ROPE,
              every=("global_attention_every_n_layers", "full_attention", 4), flat_block_type=SLIDING),
    "lara_mini": D("lara_mini", "LaraMini", 131072, 10000.0, 128, None, "half"),
    "lfm2": D("lfm2", "Lfm2", 128000, 1000000.0, None, None, "half"),
    "lfm2_moe": D("lfm2_moe", "Lfm2Moe", 128000, 1000000.0, None, None, "half"),
    "mimi": D("mimi", "Mimi", 8000, 10000.0, None, None, "half"),
    "mimi_decoder": D("mimi", "Mimi", 8000, 10000.0, None, None, "half"),
    "mimi_encoder": D("mimi", "Mimi", 8000, 10000.0, None, None, "half"),
    "mllama": D("mllama", "Mllama", 131072, 500000.0, text=True, nope=CROSS_ATTENTION),
    "mllama_text_model": D("mllama", "Mllama", 131072, 500000.0, nope=CROSS_ATTENTION),
    "minimax": D("minimax", "MiniMax", 131072, 1000000.0, None, None, "half"),
    "minicpm5_moe": D("minicpm5_moe", "MiniCPM5Moe", 524288, 5000000.0, 128),
    "minimax_m2": D("minimax_m2", "MiniMaxM2", 196608, 5000000.0, 128, None, "half"),
    "ministral": D("ministral", "Ministral", 131072, 10000.0, None, None, "half"),
    "moonshine_streaming": D("moonshine_streaming", "MoonshineStreaming", 4096, 10000.0, None, None, "interleaved",
                             block=plain_block(10000.0, 0.8)),
    "muse_glimmer_assistant": D("muse_glimmer_assistant", "MuseGlimmerAssistant", 131072, 500000.0, 128, None, "half"),
    "molmo2": D("molmo2", "Molmo2", 36864, 10000.0, 128, text=True, scaling_layers=True),
    "molmo2_text": D("molmo2", "Molmo2", 36864, 10000.0, 128, scaling_layers=True),
    "muse_glimmer": D("muse_glimmer", "MuseGlimmerText", 131072, 10000.0, 128, text=True, layer_theta=ZERO_NOPE),
    "muse_glimmer_text": D("muse_glimmer", "MuseGlimmerText", 131072, 10000.0, 128, layer_theta=ZERO_NOPE),
    "muse_spark": D("muse_spark", "MuseSparkText", 1048576, 10000.0, 64, text=True, layer_theta=ZERO_NOPE,
                    theta_without_block=500000.0),
    "muse_spark_text": D("muse_spark", "MuseSparkText", 1048576, 10000.0, 64, layer_theta=ZERO_NOPE,
                         theta_without_block=500000.0),
    "nemotron": D("nemotron", "Nemotron", 4096, 10000.0, None, 0.5, "half"),
    "nemotron3_5_transcribe_asr_audio": D("nemotron3_5_transcribe", "Nemotron3_5Transcribe", 5000, 10000.0, None, None, "half",
                                           block=plain_block(10000.0, 0.5)),
    "nemotron3_diarization_audio": D("nemotron3_diarization", "Nemotron3Diarization", 5000, 10000.0, None, None, "half"),
    "neucodec": D("neucodec", "NeuCodec", 4096, 10000.0, 64, None, "half"),
    "nomic_bert": D("nomic_bert", "NomicBert", 2048, 1000.0, None, None, "half"),
    "olmo": D("olmo", "Olmo", 2048, 10000.0, None, None, "half"),
    "olmo2": D("olmo2", "Olmo2", 2048, 10000.0, None, None, "half"),
    "olmo_hybrid": D("olmo_hybrid", "OlmoHybrid", 65536, 10000.0, nope=LINEAR_HYBRID),
    "olmoe": D("olmoe", "Olmoe", 4096, 10000.0, None, None, "half"),
    "openai_privacy_filter": D("openai_privacy_filter", "OpenAIPrivacyFilter", 131072, 150000.0, 64, None, "interleaved",
                               block=GPT_OSS_YARN),
    "pe_audio_encoder": D("pe_audio", "PeAudioEncoder", 10000, 20000.0, 128, None, "interleaved"),
    "pe_audio_video_encoder": D("pe_audio_video", "PeAudioVideoEncoder", 10000, 20000.0, 128, None, "interleaved"),
    "pe_video_encoder": D("pe_video", "PeVideoEncoder", 10000, 20000.0, 128, None, "interleaved"),
    "phimoe": D("phimoe", "Phimoe", 131072, 1000000.0, None, None, "half"),
    "pocket_tts_audio_tokenizer": D("pocket_tts_audio_tokenizer", "PocketTTSAudioTokenizer", 8000, 10000.0, None, None, "half"),
    "qwen2_5_omni_dit": D("qwen2_5_omni", "Qwen2_5OmniDiT", 32768, 10000.0, 64, None, "half"),
    "qwen3_5": D("qwen3_5", "Qwen3_5Text", 32768, 10000.0, 256, 0.25, "half", text=True),
    "qwen3_5_moe": D("qwen3_5_moe", "Qwen3_5MoeText", 32768, 10000.0, 256, 0.25, "half", text=True),
    "qwen3_5_moe_text": D("qwen3_5_moe", "Qwen3_5MoeText", 32768, 10000.0, 256, 0.25, "half"),
    "qwen3_5_text": D("qwen3_5", "Qwen3_5Text", 32768, 10000.0, 256, 0.25, "half"),
    "qwen3_next": D("qwen3_next", "Qwen3Next", 32768, 10000.0, 256, 0.25, "half"),
    "qwen4_exp": D("qwen4_exp", "Qwen4ExpText", 32768, 10000.0, 256, None, "half", text=True),
    "qwen4_exp_text": D("qwen4_exp", "Qwen4ExpText", 32768, 10000.0, 256, None, "half"),
    "seed_oss": D("seed_oss", "SeedOss", 524288, 10000.0, 128, None, "half"),
    "smollm3": D("smollm3", "SmolLM3", 32768, 2000000.0, None, None, "half", nope=NO_ROPE_LAYERS),
    "solar_open": D("solar_open", "SolarOpen", 131072, 1000000.0, 128, None, "half"),
    "starcoder2": D("starcoder2", "Starcoder2", 4096, 10000.0, None, None, "half"),
    "t5_gemma_module": D("t5gemma", "T5Gemma", 8192, 10000.0, 256, None, "half"),
    "unlimited_ocr": D("unlimited_ocr", "UnlimitedOcrText", 32768, 10000.0, None, None, "half", text=True),
    "unlimited_ocr_text": D("unlimited_ocr", "UnlimitedOcrText", 32768, 10000.0, None, None, "half"),
    "vaultgemma": D("vaultgemma", "VaultGemma", 8192, 10000.0, 256, None, "half"),
    "voxtral_realtime": D("voxtral_realtime", "VoxtralRealtime", 131072, 10000.0, None, None, "half", text=True,
                          block=plain_block(1000000.0)),  # the wrapper's text_config default, not its class's
    "voxtral_realtime_encoder": D("voxtral_realtime", "VoxtralRealtime", 1500, 10000.0, 64, None, "half"),
    "voxtral_realtime_text": D("voxtral_realtime", "VoxtralRealtime", 131072, 10000.0, None, None, "half"),
    "xcodec2": D("xcodec2", "Xcodec2", 4096, 10000.0, 64, None, "half"),
    "olmo3": D("olmo3", "Olmo3", 2048, 500000.0, block={t: plain_block(500000.0) for t in ("full_attention", SLIDING)}),
    "modernbert": D("modernbert", "ModernBert", 8192, {"full_attention": 160000.0, SLIDING: 10000.0}),
    "modernbert-decoder": D("modernbert_decoder", "ModernBertDecoder", 8192, {"full_attention": 160000.0, SLIDING: 10000.0}),
    "mellum": D("mellum", "Mellum", 131072, {"full_attention": 500000.0, SLIDING: 10000.0}, 128),
    "ultrabert": D("ultrabert", "Ultrabert", 32768, {"full_attention": 2560000.0, SLIDING: 10000.0}),
    "laguna": D("laguna", "Laguna", 131072, {"full_attention": 500000.0, SLIDING: 10000.0}, 128,
                block={"full_attention": plain_block(500000.0, 0.5), SLIDING: plain_block(10000.0, 1.0)}),
    "mimo_v2_flash": D("mimo_v2_flash", "MiMoV2Flash", 131072, {"full_attention": 5000000.0, SLIDING: 10000.0}, 192,
                         block={"full_attention": plain_block(5000000.0, 0.334), SLIDING: plain_block(10000.0, 0.334)}),
    "ministral3": D("ministral3", "Ministral3", 262144, 10000.0, 128,
                    block={**yarn_block(1000000.0, 16.0, 16384), "mscale_all_dim": 1.0, "mscale": 1.0,
                           "llama_4_scaling_beta": 0.1, "max_position_embeddings": 262144}),
    "gemma3n": D("gemma3n", "Gemma3n", 32768, {"full_attention": 1000000.0, SLIDING: 10000.0}, 256, text=True, single_apply=True),
    "gemma3n_text": D("gemma3n", "Gemma3n", 32768, {"full_attention": 1000000.0, SLIDING: 10000.0}, 256, single_apply=True),
    "lfm3": D("lfm3", "Lfm3", 128000, {"full_attention": 1000000.0, SLIDING: 10000.0}, 128,
              block={"full_attention": {**plain_block(1000000.0, 0.5), "rope_type": "proportional"},
                     SLIDING: plain_block(10000.0)}),
    "beam": D("beam", "Beam", 8192, 10000.0, 128),
    "cohere2_moe": D("cohere2_moe", "Cohere2Moe", 8192, 10000.0, 128, None, "interleaved", nope=SLIDING_ONLY),
    "flint": D("flint", "Flint", 262144, 10000.0, 128, nope=SLIDING_ONLY),
    "kyutai_speech_to_text": D("kyutai_speech_to_text", "KyutaiSpeechToText", 750, 10000.0),
    "moshi": D("moshi", "Moshi", 3000, 10000.0),
    "neomme": D("neomme", "NeoMME", 16384, {"full_attention": 1000000.0, SLIDING: 10000.0}, 64,
                block={"full_attention": plain_block(1000000.0, 0.25), SLIDING: plain_block(10000.0, 1.0)}),
    "pocket_tts_audio_tokenizer_decoder": D("pocket_tts_audio_tokenizer", "PocketTTSAudioTokenizer", 8000, 10000.0),
    "pocket_tts_audio_tokenizer_encoder": D("pocket_tts_audio_tokenizer", "PocketTTSAudioTokenizer", 8000, 10000.0),
    "zaya": D("zaya", "Zaya", 131072, {"hybrid": 5000000.0, "hybrid_sliding": 10000.0}, 128,
             block={"hybrid": plain_block(5000000.0, 0.5), "hybrid_sliding": plain_block(10000.0, 0.5)}),
    # Config types whose model is another family's (transformers' MODEL_MAPPING): that family's rotary code.
    "exaone": D("llama", "Llama", 4096, 500000.0),
    "internlm3": D("llama", "Llama", 32768, 10000.0, 128),
    "iquestcoder": D("llama", "Llama", 131072, 10000.0, 128),
    "sarvam_moe": D("glm4_moe", "Glm4Moe", 131072, 8000000.0, 64),
    "param2moe": D("glm4_moe", "Glm4Moe", 32768, 500000.0, 64, partial=1.0),
    "phi": D("phi", "Phi", 2048, 10000.0, partial=0.5, split=True),
    "persimmon": D("persimmon", "Persimmon", 16384, 10000.0, partial=0.5, split=True),
}


def read(cfg: ModelConfig) -> list[Role]:
    spec = DECODERS[cfg.architecture]
    text = text_part(cfg) if spec.text else cfg
    if spec.paired_blocks:
        text = unpaired(text)
    heads, head_dim = kv_channel_heads(text) if spec.kv_channels else heads_and_dim(text, spec.head_dim)
    text.ignore(*MASKING)
    max_positions = text.number("max_position_embeddings", spec.max_positions, integer=True)
    count = text.number("num_hidden_layers", 0, integer=True)
    rotating = rope_layers(text, spec, count)
    roles = []
    for layer_type, block, block_name in blocks(text, spec):
        block, beta = split_query_scale(block)
        theta = spec.theta.get(layer_type, 10000.0) if isinstance(spec.theta, dict) else spec.theta
        if spec.theta_without_block is not None and block is None:
            if text.has("rope_theta"):
                text.fail("rope_theta", text.get("rope_theta"), f"transformers' {cfg.architecture} config ignores it without "
                          f"rope_parameters (it sets rope_theta {spec.theta_without_block}); put it in rope_parameters")
            theta = spec.theta_without_block
        values = rope_values(text, block, head_dim=head_dim, heads=heads, block_name=block_name,
                             max_positions=max_positions, theta=text.number("rope_theta", theta),
                             partial=text.get("partial_rotary_factor", spec.partial), pair_layout=spec.pair_layout)
        extra = {**({"layer_type": layer_type} if layer_type else {}), **({"single_apply": True} if spec.single_apply else {}),
                 **({"split": True} if spec.split else {})}
        ids = tuple(i for i in of_type(text, layer_type, count, spec) if i in rotating) if count else ()
        name = LAYER_ROLES.get(layer_type, f"rope-{layer_type}") if layer_type else "rope"
        if spec.scaling_layers:
            roles += scaled_and_unscaled(text, spec, values, ids, count, extra)
            continue
        groups, notes = theta_groups(text, spec, values["base"], ids, count)
        for base, group in groups:
            at_base = {} if base is None else {"rope_theta": base}
            hf = hf_rope(f"{spec.module}.modeling_{spec.module}", f"{spec.prefix}RotaryEmbedding", text_config=spec.text,
                         **extra, **at_base)
            role_name = name if len(groups) == 1 else f"{name}-theta{base:.0f}" if base == int(base) else f"{name}-theta{base}"
            roles.append(rope_role({**values, "base": values["base"] if base is None else base}, text, hf, role_name,
                                   group, notes))
        if beta is not None:
            roles.append(query_scale_role(text, spec.module, heads, head_dim, beta, values, count))
    if text is not cfg:
        text.check_all_read()
    return roles


def scaled_and_unscaled(cfg: ModelConfig, spec: D, values: dict[str, Any], ids: tuple[int, ...], count: int,
                        extra: dict[str, Any]) -> list[Role]:
    """Molmo2's roles: the block's rope on rope_scaling_layers, transformers' unscaled rotary (the default rope
    at the same rope_theta, on every head channel) on the other layers; one role when either is empty or the
    block is not scaled."""
    scaled = cfg.get("rope_scaling_layers", None)
    if scaled is None:
        scaled = list(range(count))
    if not isinstance(scaled, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in scaled):
        cfg.fail("rope_scaling_layers", scaled, "expected a list of layer numbers")
    module, rotary = f"{spec.module}.modeling_{spec.module}", f"{spec.prefix}RotaryEmbedding"
    unscaled = tuple(i for i in ids if i not in scaled)
    if values["scaling"] == "default" or not unscaled:
        return [rope_role(values, cfg, hf_rope(module, rotary, text_config=spec.text, **extra), "rope", ids)]
    plain = {k: values[k] for k in ("head_dim", "heads", "base", "max_positions", "pair_layout")}
    return [rope_role(values, cfg, hf_rope(module, rotary, text_config=spec.text, **extra), "rope-scaled",
                      tuple(i for i in ids if i in scaled)),
            rope_role({**plain, "scaling": "default"}, cfg, hf_rope(module, rotary, text_config=spec.text, unscaled=True,
                                                                  **extra), "rope-unscaled", unscaled,
                      ("rope_scaling_layers leaves these layers the unscaled rotary at the same rope_theta",))]


def theta_groups(cfg: ModelConfig, spec: D, base: float, ids: tuple[int, ...],
                 count: int) -> tuple[list[tuple[float | None, tuple[int, ...]]], tuple[str, ...]]:
    """The rope layers split by their layer_rope_theta base ((None, ids): all at the rope block's base), and
    the notes that say how the list was read."""
    if not spec.layer_theta:
        return [(None, ids)], ()
    thetas = cfg.get("layer_rope_theta", None)
    if thetas is None:
        zero = spec.layer_theta == ZERO_NOPE
        thetas = [0 if zero and (count - 1 - i) % 4 == 0 else base for i in range(count)]
    if not isinstance(thetas, list) or len(thetas) != count or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 for t in thetas):
        cfg.fail("layer_rope_theta", thetas, f"expected {count} rope bases, 0 for a NoPE layer")
    if spec.layer_theta == ZERO_NOPE:
        ignored = sorted({float(t) for t in thetas if t and t != base})
        notes = (f"layer_rope_theta's non-zero entries {ignored} only mark rope layers: transformers' {cfg.architecture} "
                 f"rotates them with rope_theta = {base}",) if ignored else ()
        return [(None, tuple(i for i in ids if thetas[i]))], notes
    return [(float(t), tuple(i for i in ids if thetas[i] == t)) for t in sorted({t for t in thetas if t})], ()


def blocks(cfg: ModelConfig, spec: D) -> list[tuple[str, dict[str, Any] | None, str]]:
    """(layer type or '', rope block, its name): one block for every layer, or one per layer type (a line
    with a base per layer type and no block: its config class's default rope at each type's base)."""
    present = [n for n in ("rope_parameters", "rope_scaling") if cfg.has(n)]
    if len(present) == 2:
        cfg.fail("rope_scaling", cfg.get("rope_scaling"), "the config also has rope_parameters; keep one of them")
    name = present[0] if present else "rope_parameters"
    block = cfg.get(name, None)
    if block is None:
        block = default_block(cfg, spec)
    if block is None and isinstance(spec.theta, dict):
        block = {t: {"rope_type": "default", "rope_theta": theta} for t, theta in spec.theta.items()}
    if spec.flat_block_type and not (isinstance(block, dict) and block and all(isinstance(v, (dict, type(None)))
                                                                           for v in block.values())):
        return [(spec.flat_block_type, block, name)]
    if isinstance(block, dict) and block and all(isinstance(v, (dict, type(None))) for v in block.values()):
        types = set(layer_types(cfg, cfg.number("num_hidden_layers", 0, integer=True), spec))
        return [(t, b, f"{name}.{t}") for t, b in block.items() if b is not None and (not types or t in types)]
    return [("", block, name)]


def default_block(cfg: ModelConfig, spec: D) -> dict[str, Any] | None:
    """The line's block for a config that writes none (None: plain rope at the line's base), with the top-level
    rope_theta and partial_rotary_factor the config does write put in it (per layer type where it is keyed so), as
    transformers' config classes put them."""
    if spec.block is None:
        return None
    written = {key: cfg.get(key) for key in ("rope_theta", "partial_rotary_factor") if cfg.has(key)}
    if all(isinstance(v, dict) for v in spec.block.values()):
        return {t: {**b, **written} for t, b in spec.block.items()}
    return {**spec.block, **written}


def unpaired(cfg: ModelConfig) -> ModelConfig:
    """Dory's config as its config class reads it: layer_types naming (attention, mlp) block pairs keep every
    other entry, and num_hidden_layers counts layers, not blocks (the same keys, marked read together)."""
    types = cfg.get("layer_types", None)
    if not isinstance(types, list) or "mlp" not in types:
        return cfg
    count = cfg.number("num_hidden_layers", integer=True)
    layers = ModelConfig({**cfg.data, "layer_types": types[::2], "num_hidden_layers": count // 2}, cfg.architecture,
                         cfg.source, cfg.folder)
    layers.read = cfg.read
    return layers


def kv_channel_heads(cfg: ModelConfig) -> tuple[int, int]:
    """JetMoE's (heads, head_dim): its attention views q as heads of kv_channels (default 128) channels,
    num_key_value_heads (16) × num_experts_per_tok (2) of them, whatever num_attention_heads says."""
    if cfg.has("head_dim") and cfg.get("head_dim") != cfg.get("kv_channels", 128):
        cfg.fail("head_dim", cfg.get("head_dim"), "JetMoE's config maps head_dim to kv_channels; they disagree")
    return cfg.count("num_key_value_heads", 16) * cfg.count("num_experts_per_tok", 2), cfg.count("kv_channels", 128)


def layer_types(cfg: ModelConfig, count: int, spec: D | None = None) -> list[str]:
    """layer_types as written, else transformers' rule: every sliding_window_pattern-th layer (default 4)
    is full attention, the rest slide (OLMo-Hybrid: the rest are linear_attention)."""
    types = cfg.get("layer_types", None)
    if types is not None:
        if not isinstance(types, list) or (count and len(types) != count) or not all(isinstance(t, str) for t in types):
            cfg.fail("layer_types", types, f"expected {count} layer type names")
        return types
    if spec is not None and spec.every:
        key, kind, default = spec.every
        every = cfg.count(key, default) if key else default
        return [kind if (i + 1) % every == 0 else SLIDING for i in range(count)]
    if spec is not None and spec.nope == LINEAR_HYBRID:
        types = [LINEAR_ATTENTION if i % 4 != 3 else "full_attention" for i in range(count)]
        return types if "full_attention" in types or not count else [*types[:-1], "full_attention"]
    pattern = cfg.get("sliding_window_pattern", 4)
    if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
        return ["full_attention"] * count
    return [SLIDING if (i + 1) % pattern else "full_attention" for i in range(count)]


def of_type(cfg: ModelConfig, layer_type: str, count: int, spec: D | None = None) -> list[int]:
    if not layer_type:
        return list(range(count))
    return [i for i, t in enumerate(layer_types(cfg, count, spec)) if t == layer_type]


def rope_layers(cfg: ModelConfig, spec: D, count: int) -> set[int]:
    """The layers that rotate q/k: attention layers (layer_types naming something else, such as LFM2's
    conv layers, have no attention) less the architecture's NoPE layers."""
    if not count:
        return set()
    ruled = cfg.has("layer_types") or spec.nope in (SLIDING_ONLY, GLOBAL_NOPE, LINEAR_HYBRID, SLIDING_ROPE)
    types = layer_types(cfg, count, spec) if ruled else ["full_attention"] * count
    attention = {i for i, t in enumerate(types) if softmax_attention(t)}
    windowed = cfg.get("sliding_window", None) is not None
    if spec.nope == NO_ROPE_LAYERS:
        interval = cfg.number("no_rope_layer_interval", 4, integer=True)
        flags = cfg.get("no_rope_layers", None) or [int((i + 1) % interval != 0) for i in range(count)]
        if not isinstance(flags, list) or len(flags) < count or set(flags) - {0, 1}:
            cfg.fail("no_rope_layers", flags, f"expected {count} flags, 1 where the layer uses rope and 0 for NoPE")
        return {i for i in attention if flags[i]}
    if spec.nope == SLIDING_ONLY:
        return {i for i in attention if windowed and types[i] == SLIDING}
    if spec.nope == GLOBAL_NOPE:
        return {i for i in attention if not windowed or types[i] == SLIDING}
    if spec.nope == CROSS_ATTENTION:
        cross = cfg.get("cross_attention_layers", [3, 8, 13, 18, 23, 28, 33, 38])
        if not isinstance(cross, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in cross):
            cfg.fail("cross_attention_layers", cross, "expected a list of layer numbers")
        return attention - set(cross)
    if spec.nope == LINEAR_HYBRID:
        return {i for i in attention if types[i] == "full_attention"}
    if spec.nope == SLIDING_ROPE:
        return {i for i in attention if types[i] == SLIDING}
    return attention


def split_query_scale(block: dict[str, Any] | None) -> tuple[dict[str, Any] | None, float | None]:
    """The rope block without Ministral-3's llama_4_scaling_beta (and the max_position_embeddings its
    rope functions never read), and that β."""
    if not isinstance(block, dict) or QUERY_SCALE not in block:
        return block, None
    rest = {k: v for k, v in block.items() if k not in (QUERY_SCALE, "max_position_embeddings")}
    return rest, block[QUERY_SCALE]


def query_scale_role(cfg: ModelConfig, module: str, heads: int, head_dim: int, beta: Any, rope: dict[str, Any],
                     count: int) -> Role:
    floor = rope.get("original_max_positions") or rope["max_positions"]
    if isinstance(beta, bool) or not isinstance(beta, (int, float)):
        cfg.fail(f"rope_parameters.{QUERY_SCALE}", beta, "expected a number")
    values = {"heads": heads, "head_dim": head_dim, "beta": float(beta), "floor_scale": int(floor), "offset": 0,
              "max_positions": rope["max_positions"]}
    hf = QueryScaleRecipe(module=f"transformers.models.{module}.modeling_{module}", scale="get_llama_4_attn_scale")
    notes = ("x is the rotated q, [batch, seq, heads, head_dim]; position_ids are the model's own",
             f"q · (1 + β·ln(1 + ⌊p / {floor}⌋)), β = llama_4_scaling_beta = {beta}: every layer, after rope")
    return Role("query-scale", "query-scale", values, tuple(range(count)), notes, hf)


# Decoder layers without rope, named by what they are where they are not plain NoPE attention.
NOPE_KINDS = {CROSS_ATTENTION: "cross-attention layers without rope", LINEAR_HYBRID: "linear-attention layers without rope"}


def encodings(model_type: str, lookup: Lookup) -> str:
    """rope, and each form its line reads beyond the plain one."""
    spec = DECODERS[model_type]
    kinds = ["rope" + (" per layer type" if isinstance(spec.theta, dict) else ""),
             *(["interleaved pairs"] if spec.pair_layout == "interleaved" else []),
             *([NOPE_KINDS.get(spec.nope, "NoPE layers")] if spec.nope else []),
             *(["heads of kv_channels"] if spec.kv_channels else []),
             *(["scaled on rope_scaling_layers, unscaled on the others"] if spec.scaling_layers else []),
             *(["layer_types as (attention, mlp) block pairs, recurrent layers looped"] if spec.paired_blocks else []),
             *(["a rope base per layer (layer_rope_theta)" if spec.layer_theta == PER_THETA
                else "NoPE layers (layer_rope_theta 0)"] if spec.layer_theta else [])]
    return ", ".join(kinds)


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class QueryScaleRecipe(Recipe):
    """The model's get_llama_4_attn_scale(positions, β, F)."""

    kind: ClassVar[str] = "query-scale"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"scale": re.compile(r"get_llama_4_attn_scale")}

    module: str
    scale: str


class QueryScaleSession(Session):
    """x times the model's own get_llama_4_attn_scale(position_ids, β, F) (Ministral-3), broadcast over
    heads and channels as the graph's layout has them."""

    def __init__(self, artifact: Artifact, recipe: QueryScaleRecipe, folder: Path):
        self.scale = transformers_attr(recipe.module, recipe.scale)
        self.p = artifact.params

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            s = self.scale(positions, self.p.beta, self.p.floor_scale)[:, 0, :, 0].float()  # [batch, seq]
        for axis in {"bshd": (2, 3), "bhsd": (1, 3), "bsh": (2,)}[self.p.layout]:
            s = s.unsqueeze(axis)
        return (torch_float(feeds["x"]) * s).numpy()


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "NanoChat: its rotate_half flips the signs (x2, −x1), a rotation by −θ; not modelled": ("nanochat",),
    "DBRX: transformers 5.24 rotates with rope_parameters (default θ 10000) while attn_config.rope_theta (500000 "
    "in published configs) goes unused; posexport will not pick one of the two": ("dbrx",),
}


FAMILY = Family(tuple(DECODERS), read, encodings, pending=PENDING, sessions={QueryScaleRecipe: QueryScaleSession})
