"""Phi-3 / Phi-3.5 / Phi-4-mini: rope with longrope (published as `longrope`, first as `su`; transformers
also turns a Phi-3 `yarn` into longrope), a top-level `original_max_position_embeddings` (default 4096)
that wins over the block's, and partial_rotary_factor (Phi-4-mini's 0.75)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import heads_and_dim, hf_rope, rope_role
from .rope_reading import rope_values, top_block

PHI3_AS_LONGROPE = ("su", "yarn")


def read(cfg: ModelConfig) -> list[Role]:
    heads, head_dim = heads_and_dim(cfg)
    cfg.ignore("sliding_window")
    name, block = top_block(cfg)
    if block is not None and block.get("rope_type", block.get("type")) in PHI3_AS_LONGROPE:
        block = {**{k: v for k, v in block.items() if k != "type"}, "rope_type": "longrope"}
    values = rope_values(
        cfg, block, head_dim=head_dim, heads=heads, block_name=name,
        max_positions=cfg.number("max_position_embeddings", 4096, integer=True),
        theta=cfg.number("rope_theta", 10000.0), partial=cfg.get("partial_rotary_factor", 1.0),
        original_top=cfg.number("original_max_position_embeddings", 4096, integer=True),
    )
    return [rope_role(values, cfg, hf_rope("phi3.modeling_phi3", "Phi3RotaryEmbedding"))]


FAMILY = Family(("phi3",), read, "rope (longrope)")
