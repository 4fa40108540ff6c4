"""GLM-4 (`glm4`, GLM-4-0414) and GLM (`glm`, the GLM-4-9B port): partial rotary (partial_rotary_factor,
default 0.5) with interleaved pairs (2i, 2i + 1) on the leading rotary channels; head_dim default 128."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import heads_and_dim, hf_rope, rope_role
from .rope_reading import rope_values, top_block


def read(cfg: ModelConfig) -> list[Role]:
    heads, head_dim = heads_and_dim(cfg, 128)
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=head_dim, heads=heads, block_name=name, pair_layout="interleaved",
                         max_positions=cfg.number("max_position_embeddings", 131072, integer=True),
                         theta=cfg.number("rope_theta", 10000.0), partial=cfg.number("partial_rotary_factor", 0.5))
    module = cfg.architecture
    prefix = {"glm4": "Glm4", "glm": "Glm"}[module]
    note = f"pairs (2i, 2i+1) of the first {values['rotary_dim']} of {head_dim} channels rotate; the rest pass through"
    return [rope_role(values, cfg, hf_rope(f"{module}.modeling_{module}", f"{prefix}RotaryEmbedding"), notes=(note,))]


FAMILY = Family(("glm", "glm4"), read, "rope (partial, interleaved pairs)")
