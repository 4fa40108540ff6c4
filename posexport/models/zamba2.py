"""Zamba2 (`zamba2`): Mamba-2 layers with a shared attention block before the Mamba layer of each `hybrid`
layer (`layers_block_type`, transformers' layer_types; the Mamba layers it names `linear_attention`). With
`use_mem_rope` the shared blocks rotate q/k, half-split, on heads of 2·hidden_size / num_attention_heads
channels (the config class computes attention_head_dim so, whatever config.json says); without it nothing
in the model carries positions but the recurrence. `use_long_context` sets max_position_embeddings to
16384 (the rotary frequencies stay rope_theta's)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values, top_block

# The config class's layers_block_type when config.json has none: 54 layers, hybrid ones among Mamba layers.
DEFAULT_BLOCKS = (["linear_attention"] + (["linear_attention"] * 5 + ["hybrid"]) * 7 + ["linear_attention"] * 4
                  + ["hybrid"] + ["linear_attention"] * 3 + ["hybrid"] + ["linear_attention"] * 2)


def read(cfg: ModelConfig) -> list[Role]:
    if not cfg.get("use_mem_rope", False):
        cfg.fail("use_mem_rope", cfg.get("use_mem_rope", False), "Zamba2's shared attention blocks then use no rope "
                 "and its Mamba layers carry order: the model has no positional encoding to build")
    heads = cfg.count("num_attention_heads", 32)
    head_dim = 2 * cfg.count("hidden_size", 2560) // heads
    blocks = cfg.get("layers_block_type", DEFAULT_BLOCKS)
    if not isinstance(blocks, list) or not all(isinstance(b, str) for b in blocks):
        cfg.fail("layers_block_type", blocks, "expected a list of layer type names")
    cfg.ignore("attention_head_dim", "head_dim", "kv_channels", "hybrid_layer_ids")  # recomputed by the config class
    long_context = cfg.get("use_long_context", False)
    max_positions = 16384 if long_context else cfg.number("max_position_embeddings", 4096, integer=True)
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=head_dim, heads=heads, block_name=name, max_positions=max_positions,
                         theta=cfg.number("rope_theta", 10000.0))
    hf = hf_rope("zamba2.modeling_zamba2", "Zamba2RotaryEmbedding")
    notes = (f"the shared attention blocks of the hybrid layers; heads of 2·hidden_size / num_attention_heads = {head_dim} "
             "channels",)
    return [rope_role(values, cfg, hf, "rope", tuple(i for i, b in enumerate(blocks) if b == "hybrid"), notes)]


FAMILY = Family(("zamba2",), read, "rope on the hybrid layers' shared attention (use_mem_rope)")
