"""Falcon (7B/40B/180B and the new decoder architecture): rope on the whole head (head_dim = hidden_size //
num_attention_heads), half-split pairs. Falcon-RW (`alibi: true`) is refused: its model code adds alibi
with bfloat16-rounded slopes to the unscaled scores before the 1/√head_dim scale, which posexport's alibi
graph does not reproduce."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values, top_block


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.get("alibi", False):
        cfg.fail("alibi", True, "Falcon-RW's alibi (bfloat16 slopes added before the 1/√d scale) is not in "
                                "posexport's catalogue")
    heads = cfg.number("num_attention_heads", cfg.get("n_head", 71), integer=True)
    cfg.ignore("rotary")
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=cfg.number("hidden_size", 4544, integer=True) // heads, heads=heads,
                         block_name=name, max_positions=cfg.number("max_position_embeddings", 2048, integer=True),
                         theta=cfg.number("rope_theta", 10000.0))
    return [rope_role(values, cfg, hf_rope("falcon.modeling_falcon", "FalconRotaryEmbedding"))]


FAMILY = Family(("falcon",), read, "rope")
