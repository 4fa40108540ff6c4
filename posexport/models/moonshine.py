"""Moonshine (`moonshine`): one rope for the encoder's and the decoder's self-attention (cross-attention has
none), interleaved pairs (2i, 2i + 1) on the first int(head_dim · partial_rotary_factor) channels (default
0.9), head_dim = hidden_size // heads; the encoder and decoder head counts must agree (transformers' one
rotary module serves both)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values, top_block


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.number("encoder_num_attention_heads", 8, integer=True)
    decoder = cfg.number("decoder_num_attention_heads", 8, integer=True)
    if decoder != heads:
        cfg.fail("decoder_num_attention_heads", decoder, f"posexport reads Moonshine with as many decoder heads as encoder heads ({heads})")
    cfg.ignore("num_attention_heads", "pad_head_dim_to_multiple_of")
    head_dim = cfg.number("hidden_size", 288, integer=True) // heads
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=head_dim, heads=heads, block_name=name, pair_layout="interleaved",
                         max_positions=cfg.number("max_position_embeddings", 512, integer=True),
                         theta=cfg.number("rope_theta", 10000.0), partial=cfg.get("partial_rotary_factor", 0.9))
    hf = hf_rope("moonshine.modeling_moonshine", "MoonshineRotaryEmbedding")
    return [rope_role(values, cfg, hf, "rope", (), notes=("the encoder's and the decoder's self-attention",))]


FAMILY = Family(("moonshine",), read, "rope (partial, interleaved pairs)")
