"""Tiny configs of every model type in transformers' config registry, saved by transformers' own config
classes (save_pretrained) into a temp folder: hidden 64, 4 heads (2 key/value), head_dim 16, 4 layers,
vocab 64. A multimodal config gets these sizes in its text_config. Nothing is downloaded."""

from __future__ import annotations

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
