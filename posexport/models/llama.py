"""Llama (1, 2, 3.x), Mistral, Mixtral, Qwen2/2.5, Qwen3 (and their MoE variants): rope on the whole head,
half-split pairs, one rope block for every layer.

transformers' defaults when a key is absent: max_position_embeddings and rope_theta per architecture
(below); head_dim: Qwen3's 128, the others hidden_size // num_attention_heads.
"""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import heads_and_dim, hf_rope, rope_role
from .rope_reading import rope_values, top_block

# model_type -> (transformers module, class prefix, max_position_embeddings default, rope_theta default, head_dim default)
ARCHITECTURES = {
    "llama": ("llama", "Llama", 2048, 10000.0, None),
    "mistral": ("mistral", "Mistral", 131072, 10000.0, None),
    "mixtral": ("mixtral", "Mixtral", 131072, 1000000.0, None),
    "qwen2": ("qwen2", "Qwen2", 32768, 10000.0, None),
    "qwen2_moe": ("qwen2_moe", "Qwen2Moe", 32768, 10000.0, None),
    "qwen3": ("qwen3", "Qwen3", 32768, 10000.0, 128),
    "qwen3_moe": ("qwen3_moe", "Qwen3Moe", 32768, 10000.0, None),
    # Qwen3-Omni's code predictor (its talker's multi-codebook head): a Qwen3 decoder
    "qwen3_omni_moe_talker_code_predictor": ("qwen3_omni_moe", "Qwen3OmniMoe", 32768, 10000.0, 128),
}


def read(cfg: ModelConfig) -> list[Role]:
    module, prefix, max_default, theta_default, head_dim_default = ARCHITECTURES[cfg.architecture]
    heads, head_dim = heads_and_dim(cfg, head_dim_default)
    # Sliding-window attention (Mistral, Qwen2) masks keys; it does not change positions.
    cfg.ignore("use_sliding_window", "sliding_window", "max_window_layers")
    name, block = top_block(cfg)
    values = rope_values(
        cfg, block, head_dim=head_dim, heads=heads, block_name=name,
        max_positions=cfg.number("max_position_embeddings", max_default, integer=True),
        theta=cfg.number("rope_theta", theta_default), partial=cfg.get("partial_rotary_factor", None),
    )
    return [rope_role(values, cfg, hf_rope(f"{module}.modeling_{module}", f"{prefix}RotaryEmbedding"))]


FAMILY = Family(tuple(ARCHITECTURES), read, "rope")
