"""The suite's tiny random transformers models and `make matrix`'s, one collection (matrix/ and tests/ import it;
nothing here imports posexport, so that the exporters' own venvs can run it too). Nothing is downloaded.

- ``tiny(model_type, folder)``: a tiny config of any model type of transformers' registry, saved by its own config
  class: hidden 64, 4 heads (2 key/value), head_dim 16, 4 layers, vocab 64 (SIZES; a multimodal config gets them in
  its text_config, EXTRA what a type needs beside them);
- ``rope_models(root)``, ``trained_models(root)``: named models of catalogue architectures the way a user has them
  (configs saved by transformers' classes, weights where the encoding has trained tables, or raw published-style
  config.json with the legacy spellings; SMALL);
- ``tiny_config(arch)``, ``save_model``: the seeded causal LMs with a tokenizer that the exporters export (TINY:
  2 layers, hidden 64, 4 heads of 16, 2 kv heads, vocab 100, weights large enough that logits depend on
  positions); `make matrix` builds its rows from TINY too.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

SIZES = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=4,
             intermediate_size=32, vocab_size=64, head_dim=16)
# Gemma-4's assistant refuses per-layer inputs (Gemma-3n's) in its text model, its default text model's included.
NO_PER_LAYER_INPUTS = {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0}
# Per type: what the tiny sizes must also say (keys whose defaults do not fit them).
EXTRA: dict[str, dict[str, Any]] = {
    "esmc": {"num_key_value_heads": 4},
    "smollm3": {"pad_token_id": 0},
    "xmod": {"default_language": "en_XX"},  # its forward needs a language (lang_ids) to pick its adapters
    "gemma4": {"global_head_dim": 32}, "gemma4_text": {"global_head_dim": 32},
    "gemma4_assistant": {"global_head_dim": 32, **NO_PER_LAYER_INPUTS},
    **dict.fromkeys(("gemma3n", "gemma3n_text"), {"layer_types": ["sliding_attention"] * 3 + ["full_attention"]}),
    "gptj": {"n_embd": 64, "n_head": 4, "n_layer": 4, "rotary_dim": 8},
    "codegen": {"n_embd": 64, "n_head": 4, "n_layer": 4, "rotary_dim": 8},
    "moonshine": {"hidden_size": 64, "encoder_num_attention_heads": 4, "decoder_num_attention_heads": 4,
                  "encoder_num_key_value_heads": 4, "decoder_num_key_value_heads": 4},  # its default pad id is past the tiny vocabulary
    "mimo_v2_flash": {"head_dim": 48},  # partial_rotary_factor 0.334 of 48 is an even 16
    # Learned tables: the sizes under these families' own names.
    **dict.fromkeys(("xlm", "flaubert"), {"emb_dim": 64, "n_layers": 2, "n_heads": 4}),
    **dict.fromkeys(("gpt2", "gpt-sw3", "gpt_bigcode", "imagegpt"), {"n_embd": 64, "n_layer": 2, "n_head": 4}),
    "gpt_neo": {"num_layers": 2, "attention_types": [[["global", "local"], 1]], "num_heads": 4},
    "distilbert": {"dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 32},
    "albert": {"embedding_size": 32},
    "squeezebert": {"embedding_size": 64},
    **dict.fromkeys(("bart", "mbart", "plbart", "mvp", "bigbird_pegasus", "blenderbot", "blenderbot-small", "led",
                     "florence2"),
                    {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
                     "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32}),
    **dict.fromkeys(("pegasus", "pegasus_x", "m2m_100", "nllb-moe", "xglm", "speech_to_text"),
                    {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
                     "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "num_layers": 1,
                     "attention_heads": 4, "ffn_dim": 32}),
    "fsmt": {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
             "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "src_vocab_size": 64,
             "tgt_vocab_size": 64},
    **dict.fromkeys(("kosmos_2_5_text_model", "kosmos_2_text_model"), {"embed_dim": 64, "layers": 1, "attention_heads": 4,
                                                                      "ffn_dim": 32}),
    "marian": {"d_model": 64, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 4,
               "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "pad_token_id": 1,
               "decoder_start_token_id": 1},  # its default pad id is past the tiny vocabulary
    "roformer": {"embedding_size": 64},
    **dict.fromkeys(("qwen2_audio_encoder", "audioflamingo3_encoder", "voxtral_encoder", "moss_transcribe_diarize_audio"),
                    {"d_model": 64, "hidden_size": 64, "encoder_layers": 1, "num_hidden_layers": 1, "num_mel_bins": 16,
                     "encoder_attention_heads": 4, "num_attention_heads": 4, "encoder_ffn_dim": 32,
                     "intermediate_size": 32}),
    "ctrl": {"n_embd": 64, "n_layer": 1, "n_head": 4, "dff": 32},
    "tipsv2_text_model": {"num_hidden_layers": 1},
    **dict.fromkeys(("switch_transformers", "pop2piano"), {"d_model": 32, "d_kv": 8, "d_ff": 32, "num_layers": 2,
                                                           "num_decoder_layers": 2, "num_heads": 4}),
    "pp_formulanet_text": {"d_model": 64, "decoder_layers": 1, "decoder_attention_heads": 4, "decoder_ffn_dim": 32},
    "trocr": {"d_model": 64, "decoder_layers": 1, "decoder_attention_heads": 4, "decoder_ffn_dim": 32},
    "openai-gpt": {"n_embd": 64, "n_layer": 2, "n_head": 4},
    # Pix2Struct's T5-like text decoder and the Pix2Struct-style towers (tables of 40 rows: ids 0 … 39)
    "pix2struct_text_model": {"num_heads": 4, "d_kv": 16, "num_layers": 2, "d_ff": 32},
    "pix2struct_vision_model": {"num_attention_heads": 4, "d_kv": 16, "num_hidden_layers": 2, "d_ff": 32,
                                "patch_embed_hidden_size": 48, "seq_len": 40},
    "kosmos_2_5_vision_model": {"num_attention_heads": 4, "head_dim": 16, "num_hidden_layers": 2, "intermediate_size": 32,
                                "patch_embed_hidden_size": 48, "max_num_patches": 40},
    "glm_image_vision": {"image_size": 256},  # a 16 × 16 grid (its default 128 × 128 takes seconds to resample)
    # NaViT towers: a 23 × 23 grid, where transformers' i/h buckets (MiniCPM-V's) are not the identity at the trained
    # size and its i·(1/h) ones (Idefics2's) are
    **{t: {"image_size": 23 * patch} for t, patch in (("idefics2_vision", 32), ("idefics3_vision", 32), ("smolvlm_vision", 32),
                                                       ("phi4_multimodal_vision", 14), ("minicpm_ocr_vision", 16),
                                                       ("minicpmv4_6_vision", 16), ("minicpmv4_7_vision", 16))},
}
# Layer plans: pad ids inside the tiny vocabulary (for a forward), JetMoE's kv_channels unlike hidden // heads.
EXTRA.update(dict.fromkeys(("mllama", "mllama_text_model", "olmo_hybrid"), {"pad_token_id": 0}), jetmoe={"kv_channels": 8})
# Per-layer rope bases: Granite-SWA two bases and a NoPE layer; MuSE-Glimmer a non-zero entry unlike its rope_theta
# (its model rotates that layer at rope_theta all the same).
EXTRA.update(granite_swa={"layer_rope_theta": [10000.0, 0, 500000.0, 10000.0]},
             muse_glimmer_text={"layer_rope_theta": [10000.0, 0, 20000.0, 10000.0]})
# Zamba2: rope on (use_mem_rope), two hybrid layers among Mamba layers, Mamba's torch path.
EXTRA.update(zamba2={"use_mem_rope": True, "use_mamba_kernels": False,
                     "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"]})
# Dory: one input and one output layer around two recurrent layers (looped n_recurrent_loops times).
EXTRA.update(dory={"n_input_layers": 1, "n_output_layers": 1})
# Molmo2: yarn on layers 0 and 2 only, the unscaled rotary on 1 and 3.
EXTRA.update(dict.fromkeys(("molmo2", "molmo2_text"), {"rope_scaling_layers": [0, 2], "rope_parameters": {
    "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0}}))
EXTRA.update(dict.fromkeys(("muse_spark", "muse_spark_text"), {"num_local_experts": 4, "num_experts_per_tok": 2,
                                                               "moe_intermediate_size": 32, "moe_hidden_size": 64}))
# Multi-head latent attention: rope on qk_rope_head_dim channels (head_dim is that again in transformers 5).
MLA = {"num_key_value_heads": 4, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16, "kv_lora_rank": 16, "q_lora_rank": 16}
EXTRA.update(dict.fromkeys(("deepseek_v2", "deepseek_v3", "sarvam_mla", "glm4_moe_lite", "youtu", "axk1", "longcat_flash",
                            "minicpm3"), MLA))
QWEN2_VL = {"rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 1000000.0}}
QWEN3_VL = {"rope_parameters": {"rope_type": "default", "mrope_section": [4, 2, 2], "mrope_interleaved": True,
                                "rope_theta": 500000.0}}
EXTRA.update(dict.fromkeys(("qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text"), QWEN2_VL))
EXTRA.update(dict.fromkeys(("qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_omni_moe_text",
                            "qwen3_omni_moe_talker_text"), QWEN3_VL), qwen2_5_omni_text=QWEN2_VL, qwen2_5_omni_talker=QWEN2_VL)
# MLA beside other layers: Bailing-Hybrid's full_attention every 2nd layer, HY-V4's DSA indexer heads wider than the rope.
EXTRA.update(bailing_hybrid={**MLA, "layer_group_size": 2, "num_experts": 4, "num_expert_group": 1, "topk_group": 1,
                             "num_experts_per_token": 2, "moe_intermediate_size": 32, "pad_token_id": 0},
             hy_v4={**MLA, "index_head_dim": 32, "index_n_heads": 2, "index_topk": 4, "pad_token_id": 0},
             mistral4={**MLA, "head_dim": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "pad_token_id": 0})
# Kolibri-1/1.1: five layers, so that their config classes' default layer_types (every 5th global) hold one global
# layer; Kolibri-1.1's indexer heads within the query heads of one key head.
EXTRA.update(kolibri1={"num_hidden_layers": 5},
             kolibri1_1={"num_hidden_layers": 5, "index_num_heads": 2, "index_topk": 4, "index_pool_size": 64,
                         "index_num_local_tokens": 4, "index_num_sink_tokens": 1})
EXTRA.update(dict.fromkeys(("kimi_k25",), MLA), cosmos3_omni=QWEN3_VL, apertus1p5={"vocab_size": 300000})
# PaddleOCR-VL's and Cosmos-3-Edge's rotary read the sections but not mrope_interleaved.
EXTRA.update(dict.fromkeys(("paddleocr_vl", "paddleocr_vl_text"), {"rope_parameters": {
    "rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 500000.0}}))
EXTRA.update(dict.fromkeys(("cosmos3_edge", "cosmos3_edge_text"), {"rope_parameters": {
    "rope_type": "default", "mrope_section": [4, 2, 2], "rope_theta": 100000000.0}}))
# GLM-4V's sections cover its partial rotary: half of head_dim 16 (GLM-4.5V's default factor), all of it for GLM-Image.
EXTRA.update(dict.fromkeys(("glm4v", "glm4v_text", "glm46v", "glmga", "glm_ocr", "glm_ocr_text"), {"rope_parameters": {
    "rope_type": "default", "mrope_section": [2, 1, 1], "partial_rotary_factor": 0.5, "rope_theta": 500000.0}}))
EXTRA.update(dict.fromkeys(("glm4v_moe", "glm4v_moe_text"), {"rope_parameters": {
    "rope_type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000.0}}))
EXTRA.update(dict.fromkeys(("glm_image", "glm_image_text"), {"rope_parameters": {
    "rope_type": "default", "mrope_section": [4, 2, 2], "rope_theta": 10000.0}}))
# Per multimodal type: its other sub-configs, sized to fit the tiny text model; a vision tower with a learned
# pos_embed gets a checkpoint holding it.
QWEN3_VL_TOWER = {"depth": 2, "hidden_size": 32, "num_heads": 2, "intermediate_size": 32, "out_hidden_size": 64,
                  "num_position_embeddings": 36}
BESIDE_TEXT: dict[str, dict[str, Any]] = {
    **dict.fromkeys(("qwen3_vl", "qwen3_vl_moe"), {"vision_config": QWEN3_VL_TOWER}),
    "fun_asr_nano": {"adaptor_config": {"hidden_size": 64}},
    "granite_docling": {"vision_config": {"out_hidden_size": 64}},
    "llava_onevision1_5": {"vision_config": {"out_hidden_size": 64}},
}
# MuSE-Spark scatters its audio encoder's output onto the text embeddings: the same width. Their vision towers
# tiny too (their defaults make a 2-billion-parameter "tiny" model).
MUSE_TOWER = {"hidden_size": 64, "num_hidden_layers": 1, "intermediate_size": 32, "num_attention_heads": 4}
BESIDE_TEXT.update(muse_spark={"audio_config": {"out_hidden_size": 64}, "vision_config": MUSE_TOWER},
                   muse_glimmer={"vision_config": MUSE_TOWER})
POS_EMBED_KEY = "model.visual.pos_embed.weight"
# What a config class needs to be made at all.
CONSTRUCT = {"gemma4_assistant": {"text_config": {"model_type": "gemma4_text", **NO_PER_LAYER_INPUTS}}}
# Qwen-VL vision towers read alone: the tiny tower of their own config; one with a learned pos_embed gets a
# checkpoint of the tower alone holding it.
QWEN_TOWER = {k: v for k, v in QWEN3_VL_TOWER.items() if k != "num_position_embeddings"}
ROPE_ONLY_TOWER = {"hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2}  # a tower keyed as BERT's
EXTRA.update({"qwen2_vl_vision": {**QWEN_TOWER, "embed_dim": 32},
              **dict.fromkeys(("qwen2_5_vl_vision", "qwen2_5_omni_vision_encoder"), QWEN_TOWER),
              **dict.fromkeys(("qwen3_vl_vision", "qwen3_vl_moe_vision", "qwen3_5_vision", "qwen3_5_moe_vision",
                               "qwen4_exp_vision", "qwen3_omni_moe_vision_encoder", "cohere_compass_vision"), QWEN3_VL_TOWER),
              "exaone4_5_vision": {**QWEN_TOWER, "num_key_value_heads": 1},
              **dict.fromkeys(("ernie4_5_vl_moe_vision", "glm5_next_vision", "glm_ocr_vision"), QWEN_TOWER),
              "video_llama_3_vision": ROPE_ONLY_TOWER,
              **dict.fromkeys(("glm4v_vision", "glm4v_moe_vision"), {**QWEN_TOWER, "image_size": 84, "patch_size": 14}),
              "paddleocr_vl_vision": {**ROPE_ONLY_TOWER, "image_size": 84, "patch_size": 14},
              # its default MoE layout names 42 layers; its adapter takes the tower's width
              "dots3_note_vision_encoder": {**ROPE_ONLY_TOWER, "mlp_layer_types": ["dense"] * 2, "per_layer_config": {},
                                            "adapter_in_dim": 32}})
TOWER_POS_EMBED_KEY = "pos_embed.weight"
# Towers whose grid is image_size // patch_size a side: the table's name in a checkpoint of the tower alone.
IMAGE_GRID_KEYS = {**dict.fromkeys(("glm4v_vision", "glm4v_moe_vision"), "embeddings.position_embedding.weight"),
                   "paddleocr_vl_vision": "vision_model.embeddings.position_embedding.weight"}


def config_class(model_type: str) -> Any:
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]


def sized(cls: Any, model_type: str) -> dict[str, Any]:
    """The tiny sizes the class knows (a key it has no attribute for is left out)."""
    fields = cls().to_dict()
    known = {k: v for k, v in SIZES.items() if k in fields or k in getattr(cls, "__annotations__", {})}
    return {**known, **EXTRA.get(model_type, {})}


def tiny(model_type: str, folder: Path, **overrides: Any) -> Path:
    """config.json of a tiny model of this type, written by transformers' config class."""
    cls = config_class(model_type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = cls(**CONSTRUCT.get(model_type, {}))
        text = default.get_text_config()
        if text is default:
            config = cls(**{**sized(cls, model_type), **overrides})
        else:
            inner = {"model_type": text.model_type, **sized(type(text), model_type), **overrides}
            config = cls(text_config=inner, **BESIDE_TEXT.get(model_type, {}))
        config.save_pretrained(folder)
    vision = BESIDE_TEXT.get(model_type, {}).get("vision_config", {})
    if "num_position_embeddings" in vision:
        pos_embed_checkpoint(folder, vision, POS_EMBED_KEY)
    elif "num_position_embeddings" in EXTRA.get(model_type, {}):  # a vision tower's own folder
        pos_embed_checkpoint(folder, EXTRA[model_type], TOWER_POS_EMBED_KEY)
    elif model_type in IMAGE_GRID_KEYS:  # its grid, image_size // patch_size a side
        sizes = EXTRA[model_type]
        table_checkpoint(folder, IMAGE_GRID_KEYS[model_type], ((sizes["image_size"] // sizes["patch_size"]) ** 2,
                                                               sizes["hidden_size"]))
    return folder


def pos_embed_checkpoint(folder: Path, vision: dict[str, int], key: str) -> None:
    """model.safetensors holding only the vision tower's pos_embed: all its reader reads."""
    table_checkpoint(folder, key, (vision["num_position_embeddings"], vision["hidden_size"]))


def table_checkpoint(folder: Path, key: str, shape: tuple[int, ...]) -> Any:
    """model.safetensors holding only one trained table, random normal (float32); returns it."""
    import numpy as np
    from safetensors.numpy import save_file

    table = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    save_file({key: table}, str(folder / "model.safetensors"))
    return table


# --- named models of catalogue architectures ------------------------------------------------------------------

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
SMALL = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=32, vocab_size=64)


def raw(folder: Path, config: dict[str, Any]) -> Path:
    """A published-style config.json, as it is on the Hub (no transformers involved)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def saved_config(folder: Path, cls: str, **kwargs: Any) -> Path:
    """config.json written by transformers' own config class (save_pretrained)."""
    import transformers

    getattr(transformers, cls)(**kwargs).save_pretrained(folder)
    return folder


def saved_model(folder: Path, config_cls: str, model_cls: str, **kwargs: Any) -> Path:
    """A randomly initialised tiny model saved with its weights (model.safetensors)."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = getattr(transformers, config_cls)(**kwargs)
    model = getattr(transformers, model_cls)(config)
    with torch.no_grad():  # T5 initialises its bias tables to zero-ish; make every row distinct
        for name, p in model.named_parameters():
            if "relative_attention_bias" in name or "position" in name or "wpe" in name:
                p.normal_(0.0, 1.0)
    model.save_pretrained(folder)
    return folder


ROPE = ("llama31", "llama-raw", "mistral", "qwen2-yarn", "qwen3", "gemma2", "gemma3", "gemma3-raw", "gemma3-vlm", "phi3-su", "pythia",
        "stablelm", "glm4", "deepseek-v2", "deepseek-v3", "qwen2-vl", "qwen2-vl-raw", "falcon")
TRAINED = ("t5", "umt5", "gpt2", "opt", "bert", "roberta", "vit", "deit", "whisper", "swin", "beit", "beit-shared", "bloom", "mpt",
           "beit-absolute", "swin-absolute", "gemma3-vision")


# name -> how to make it: rope architectures need a config only.
def rope_models(root: Path) -> dict[str, Path]:
    phi_factors = [1.0 + 0.1 * i for i in range(8)]
    return {
        "llama31": saved_config(root / "tiny-llama31", "LlamaConfig", **SMALL, num_key_value_heads=2,
                                max_position_embeddings=131072, rope_theta=500000.0, rope_scaling=dict(LLAMA3)),
        "llama-raw": raw(root / "tiny-llama-raw", {"model_type": "llama", **SMALL, "max_position_embeddings": 4096,
                                                   "rope_theta": 10000.0, "rope_scaling": None}),
        "mistral": saved_config(root / "tiny-mistral", "MistralConfig", **SMALL, rope_theta=1000000.0),
        "qwen2-yarn": raw(root / "tiny-qwen2", {"model_type": "qwen2", **SMALL, "max_position_embeddings": 131072,
                                               "rope_theta": 1000000.0, "use_sliding_window": False,
                                               "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                                "original_max_position_embeddings": 32768}}),
        "qwen3": saved_config(root / "tiny-qwen3", "Qwen3Config", **SMALL, head_dim=32, rope_theta=1000000.0),
        "gemma2": saved_config(root / "tiny-gemma2", "Gemma2Config", **SMALL, head_dim=16),
        "gemma3": saved_config(root / "tiny-gemma3", "Gemma3TextConfig", **{**SMALL, "num_hidden_layers": 7},
                               head_dim=16, sliding_window_pattern=3,
                               rope_scaling={"rope_type": "linear", "factor": 8.0}),
        "gemma3-raw": raw(root / "tiny-gemma3-raw", {"model_type": "gemma3_text", **SMALL, "num_hidden_layers": 6,
                                                     "head_dim": 16, "rope_theta": 1000000.0,
                                                     "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
                                                     "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                                                     "max_position_embeddings": 131072}),
        "gemma3-vlm": raw(root / "tiny-gemma3-vlm", {
            "model_type": "gemma3", "mm_tokens_per_image": 256, "vision_config": {"model_type": "siglip_vision_model"},
            "text_config": {"model_type": "gemma3_text", **SMALL, "num_hidden_layers": 6, "head_dim": 16,
                            "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                            "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "max_position_embeddings": 131072}}),
        "phi3-su": raw(root / "tiny-phi3-su", {"model_type": "phi3", **SMALL, "max_position_embeddings": 131072,
                                               "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                                               "rope_scaling": {"type": "su", "short_factor": phi_factors,
                                                                "long_factor": [2 * f for f in phi_factors],
                                                                "original_max_position_embeddings": 4096}}),
        "pythia": raw(root / "tiny-pythia", {"model_type": "gpt_neox", **SMALL, "max_position_embeddings": 2048,
                                             "rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": True}),
        "stablelm": saved_config(root / "tiny-stablelm", "StableLmConfig", **SMALL, partial_rotary_factor=0.25),
        "glm4": saved_config(root / "tiny-glm4", "Glm4Config", **SMALL, head_dim=16),
        "deepseek-v2": raw(root / "tiny-deepseek-v2", {
            "model_type": "deepseek_v2", **SMALL, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16,
            "kv_lora_rank": 16, "q_lora_rank": None, "max_position_embeddings": 163840, "rope_theta": 10000,
            "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                             "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}}),
        "deepseek-v3": saved_config(root / "tiny-deepseek-v3", "DeepseekV3Config", **SMALL, qk_rope_head_dim=16,
                                    qk_nope_head_dim=16, v_head_dim=16, kv_lora_rank=16, q_lora_rank=16,
                                    max_position_embeddings=163840,
                                    rope_scaling={"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                                                  "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}),
        "qwen2-vl": saved_config(root / "tiny-qwen2-vl", "Qwen2VLConfig",
                                 text_config={**SMALL, "num_key_value_heads": 2, "rope_parameters": {
                                     "rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 1000000.0}},
                                 vision_config={"depth": 1, "embed_dim": 32, "num_heads": 2, "hidden_size": 64}),
        "qwen2-vl-raw": raw(root / "tiny-qwen2-vl-raw", {"model_type": "qwen2_vl", **SMALL, "max_position_embeddings": 32768,
                                                         "rope_theta": 1000000.0, "vision_config": {"depth": 1},
                                                         "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}),
        "falcon": saved_config(root / "tiny-falcon", "FalconConfig", **SMALL, max_position_embeddings=2048),
    }


def trained_models(root: Path) -> dict[str, Path]:
    small = dict(vocab_size=64)
    return {
        "t5": saved_model(root / "tiny-t5", "T5Config", "T5Model", **small, d_model=32, d_kv=8, d_ff=32, num_layers=2,
                          num_heads=4, relative_attention_num_buckets=16, relative_attention_max_distance=32),
        "umt5": saved_model(root / "tiny-umt5", "UMT5Config", "UMT5Model", **small, d_model=32, d_kv=8, d_ff=32,
                            num_layers=2, num_heads=4, relative_attention_num_buckets=16, relative_attention_max_distance=32),
        "gpt2": saved_model(root / "tiny-gpt2", "GPT2Config", "GPT2LMHeadModel", **small, n_embd=32, n_layer=1, n_head=2,
                            n_positions=256),
        "opt": saved_model(root / "tiny-opt", "OPTConfig", "OPTModel", **small, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, ffn_dim=32, word_embed_proj_dim=32, max_position_embeddings=100),
        "bert": saved_model(root / "tiny-bert", "BertConfig", "BertModel", **small, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=32, max_position_embeddings=128),
        "roberta": saved_model(root / "tiny-roberta", "RobertaConfig", "RobertaModel", **small, hidden_size=32,
                               num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                               max_position_embeddings=130, pad_token_id=1),
        "bloom": saved_config(root / "tiny-bloom", "BloomConfig", **small, hidden_size=48, n_layer=2, n_head=6),
        "vit": saved_model(root / "tiny-vit", "ViTConfig", "ViTModel", hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=32, image_size=32, patch_size=8),
        "deit": saved_model(root / "tiny-deit", "DeiTConfig", "DeiTModel", hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=32, image_size=32, patch_size=8),
        "whisper": saved_model(root / "tiny-whisper", "WhisperConfig", "WhisperModel", **small, d_model=32,
                               encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                               encoder_ffn_dim=32, decoder_ffn_dim=32, max_source_positions=64, max_target_positions=48,
                               num_mel_bins=8, pad_token_id=1, bos_token_id=2, eos_token_id=3, decoder_start_token_id=2),
        "swin": saved_model(root / "tiny-swin", "SwinConfig", "SwinModel", image_size=32, patch_size=4, embed_dim=16,
                            depths=[1, 2], num_heads=[2, 4], window_size=4),
        "beit": saved_model(root / "tiny-beit", "BeitConfig", "BeitModel", hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=32, image_size=32, patch_size=8,
                            use_relative_position_bias=True),
        "beit-shared": saved_model(root / "tiny-beit-shared", "BeitConfig", "BeitModel", hidden_size=32,
                                   num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, image_size=32,
                                   patch_size=8, use_shared_relative_position_bias=True),
        "beit-absolute": saved_model(root / "tiny-beit-absolute", "BeitConfig", "BeitModel", hidden_size=32,
                                     num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, image_size=32,
                                     patch_size=8, use_absolute_position_embeddings=True),
        "swin-absolute": saved_model(root / "tiny-swin-absolute", "SwinConfig", "SwinModel", image_size=32, patch_size=4,
                                     embed_dim=16, depths=[1], num_heads=[2], window_size=4, use_absolute_embeddings=True),
        "gemma3-vision": saved_model(root / "tiny-gemma3-vision", "Gemma3Config", "Gemma3ForConditionalGeneration",
                                     mm_tokens_per_image=4,
                                     text_config={**SMALL, "num_hidden_layers": 2, "head_dim": 16},
                                     vision_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                                    "intermediate_size": 32, "image_size": 32, "patch_size": 8}),
        "mpt": saved_config(root / "tiny-mpt", "MptConfig", **small, d_model=48, n_layers=2, n_heads=6, max_seq_len=4096),
    }


# --- the exporters' causal LMs (and `make matrix`'s rows) -------------------------------------------------------

VOCAB = 100
# What every tiny model shares: 2 layers, hidden 64, 4 heads of 16, 2 kv heads, vocab 100, and weights
# large enough (std 0.3) that the logits depend on positions.
TINY = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)


def tiny_config(arch: str, max_positions: int = 64, **extra: Any) -> Any:
    """A transformers config of the tiny shape above for one architecture of ARCHS."""
    import transformers

    name, own = ARCHS[arch]
    return getattr(transformers, name)(max_position_embeddings=max_positions, **(TINY | own | extra))


# architecture -> (transformers config class, what it needs beyond TINY)
ARCHS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaConfig", {}),
    "mistral": ("MistralConfig", {"sliding_window": None}),
    "gemma2": ("Gemma2Config", {"head_dim": 16}),
    "granite": ("GraniteConfig", {}),
    "qwen3": ("Qwen3Config", {"head_dim": 16}),
    "cohere": ("CohereConfig", {}),
    "glm": ("GlmConfig", {"head_dim": 16, "partial_rotary_factor": 0.5}),
}


def save_model(config: Any, folder: Path) -> Path:
    """The seeded model of ``config`` and a WordLevel tokenizer (what onnxruntime-genai's builder needs)
    in ``folder``, made once."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).eval().save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(VOCAB)}, unk_token="t3"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="t1", eos_token="t2", pad_token="t0",
                            unk_token="t3").save_pretrained(folder)
    return folder


def sample_inputs(seq: int = 8) -> dict[str, Any]:
    import torch

    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB, (1, seq))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": torch.arange(seq)[None]}
