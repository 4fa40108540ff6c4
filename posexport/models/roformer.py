"""RoFormer (`roformer`): rope in every self-attention layer, base 10000 over head_dim = hidden_size //
num_attention_heads, interleaved pairs (2i, 2i + 1). Its sin/cos rows come from the fixed table of
RoFormerSinusoidalPositionalEmbedding (max_position_embeddings rows of head_dim channels, [sin | cos] of
ω_i = 10000^(−2i/head_dim)) at positions 0 … seq − 1, and apply_rotary_position_embeddings turns each pair;
with rotary_value it turns the values too (the same rope on a third tensor). The `hf` runtime runs those two."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import CONTRACT
from .rope_reading import rope_values

THETA = 10000.0  # the table's fixed base
MODULE = "transformers.models.roformer.modeling_roformer"


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.count("num_attention_heads", 12)
    head_dim = cfg.count("hidden_size", 768) // heads
    values = rope_values(cfg, None, head_dim=head_dim, heads=heads, theta=THETA, pair_layout="interleaved",
                         max_positions=cfg.count("max_position_embeddings", 1536))
    on = "queries, keys and values" if cfg.get("rotary_value", False) else "queries and keys"
    note = f"pairs (2i, 2i+1) of all {head_dim} channels of the {on} rotate; position_ids are 0 … seq − 1"
    layers = tuple(range(cfg.count("num_hidden_layers", 12)))
    hf = {"kind": "roformer", "module": MODULE}
    return [Role("rope", "rope", values, layers, (CONTRACT, note), hf)]


FAMILY = Family(("roformer",), read, "rope (interleaved pairs)")
