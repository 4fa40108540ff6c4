"""Tiny random models of catalogue architectures, written into a folder the way a user has them: configs
saved with transformers' own classes (and weights where the encoding has trained tables), or raw
published-style config.json with the legacy spellings. Nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
