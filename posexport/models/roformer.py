"""RoFormer (`roformer`): rope in every self-attention layer, base 10000 over head_dim = hidden_size //
num_attention_heads, interleaved pairs (2i, 2i + 1). Its sin/cos rows come from the fixed table of
RoFormerSinusoidalPositionalEmbedding (max_position_embeddings rows of head_dim channels, [sin | cos] of
ω_i = 10000^(−2i/head_dim)) at positions 0 … seq − 1, and apply_rotary_position_embeddings turns each pair;
with rotary_value it turns the values too (the same rope on a third tensor). The `hf` runtime runs those two."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family
from .hf_code import from_bshd, to_bshd
from .plan import Role
from .recipes import Recipe
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
    hf = RoformerRecipe(module=MODULE)
    return [Role("rope", "rope", values, layers, (CONTRACT, note), hf)]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class RoformerRecipe(Recipe):
    """RoFormer's sinusoid table class and its attention's apply_rotary_position_embeddings."""

    kind: ClassVar[str] = "roformer"

    module: str


class RoformerSession(Session):
    """RoFormer's own table (RoFormerSinusoidalPositionalEmbedding.create_weight) at position_ids and
    RoFormerSelfAttention.apply_rotary_position_embeddings on x [batch, heads, seq, dim], as its attention does."""

    def __init__(self, artifact: Artifact, recipe: RoformerRecipe, folder: Path):
        module = recipe.module
        self.table = transformers_attr(module, "RoFormerSinusoidalPositionalEmbedding")
        self.attention = transformers_attr(module, "RoFormerSelfAttention")
        self.p = artifact.params

    def create(self, rows: int, dim: int) -> Any:
        """The table's rows 0 … rows − 1 ([sin | cos] halves, as GPT-J's create_sinusoidal_positions)."""
        return self.table(rows, dim).create_weight()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        bhsd = to_bshd(feeds["x"], self.p).transpose(1, 2)
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            table = self.create(int(positions.max()) + 1, self.p.head_dim)[positions][:, None]
            out, _ = self.attention.apply_rotary_position_embeddings(table, bhsd, bhsd)
        return from_bshd(out.transpose(1, 2), self.p)


FAMILY = Family(("roformer",), read, "rope (interleaved pairs)", sessions={RoformerRecipe: RoformerSession})
