"""Llama-4 (`llama4`, its `llama4_text`): rope as a complex multiply of the pairs (2i, 2i + 1) — the
interleaved layout — on the layers `no_rope_layers` marks 1, and NoPE on the others (default: every
`no_rope_layer_interval`-th layer, 4). With `attn_temperature_tuning` (default on) the NoPE layers scale q
by 1 + attn_scale·ln(1 + ⌊(p + 1)/floor_scale⌋) (defaults 0.1 and 8192), p the cache position: a
query-scale role on those layers. The rope layers' L2 qk-norm (use_qk_norm) comes after the rotation and
does not involve positions. The vision tower's own 2-D rope is not built."""

from __future__ import annotations

import re
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
from .hf_code import auto_config, from_bshd, to_bshd
from .plan import Role
from .recipes import Recipe
from .rope_family import heads_and_dim, hf_rope, rope_role, text_part
from .rope_reading import rope_values, top_block

MODULE = "transformers.models.llama4.modeling_llama4"
COMPLEX = ("Llama-4 multiplies the pairs (2i, 2i+1) as complex numbers by e^(i·p·θ): the interleaved layout",
           "with use_qk_norm the model L2-normalises q and k after the rotation (outside this graph)")


def read(cfg: ModelConfig) -> list[Role]:
    text = text_part(cfg)
    heads, head_dim = heads_and_dim(text, 128)
    count = text.number("num_hidden_layers", 48, integer=True)
    interval = text.number("no_rope_layer_interval", 4, integer=True)
    flags = text.get("no_rope_layers", None) or [int((i + 1) % interval != 0) for i in range(count)]
    if not isinstance(flags, list) or len(flags) < count or set(flags) - {0, 1}:
        text.fail("no_rope_layers", flags, f"expected {count} flags, 1 where the layer uses rope and 0 for NoPE")
    rotating, nope = [i for i in range(count) if flags[i]], [i for i in range(count) if not flags[i]]
    name, block = top_block(text)
    max_positions = text.number("max_position_embeddings", 131072, integer=True)
    values = rope_values(text, block, head_dim=head_dim, heads=heads, block_name=name, max_positions=max_positions,
                         theta=text.number("rope_theta", 500000.0), pair_layout="interleaved")
    nested = text is not cfg
    hf = hf_rope("llama4.modeling_llama4", "Llama4TextRotaryEmbedding", "apply_rotary_emb", text_config=nested, bshd_apply=True)
    roles = [rope_role(values, text, hf, "rope", tuple(rotating), notes=COMPLEX)]
    if text.get("attn_temperature_tuning", True) and nope:
        beta, floor = text.number("attn_scale", 0.1), text.number("floor_scale", 8192, integer=True)
        scale = {"heads": heads, "head_dim": head_dim, "beta": float(beta), "floor_scale": floor, "offset": 1,
                 "max_positions": max_positions}
        recipe = Llama4TemperatureRecipe(module=MODULE, attention="Llama4TextAttention", layer=nope[0], text_config=nested)
        notes = ("x is the NoPE layer's q, [batch, seq, heads, head_dim]; position_ids are the cache positions "
                 "(past length + arange(seq)), as Llama-4 counts them",
                 f"q · (1 + {beta}·ln(1 + ⌊(p + 1)/{floor}⌋)): attn_temperature_tuning on the NoPE layers")
        roles.append(Role("query-scale", "query-scale", scale, tuple(nope), notes, recipe))
    if nested:
        text.check_all_read()
    return roles


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class Llama4TemperatureRecipe(Recipe):
    """Llama4TextAttention of NoPE layer ``layer``: its temperature tuning of q."""

    kind: ClassVar[str] = "llama4-temperature"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"attention": re.compile(r"Llama4TextAttention")}

    module: str
    attention: str
    layer: int


CAPTURE = "posexport_capture_query"


def capture_query(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, None]:
    """An attention function that keeps the query it is handed (what the layer made of q) and attends to
    nothing: the Llama-4 session reads the layer's own temperature-tuned q from it."""
    module.captured_query = query
    return query.new_zeros(query.shape).transpose(1, 2), None


class PastLength:
    """The cache Llama4TextAttention asks for the past length (its positions start there); it stores nothing."""

    def __init__(self, length: int):
        self.length = length

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def update(self, key: Any, value: Any, layer_idx: int, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return key, value


class Llama4TemperatureSession(Session):
    """Llama4TextAttention of a NoPE layer, q_proj the identity, run on x: its own temperature tuning scales
    q at the cache positions; runs of consecutive positions go in one call (past length = the run's first
    position), any other position on its own."""

    def __init__(self, artifact: Artifact, recipe: Llama4TemperatureRecipe, folder: Path):
        import copy

        import torch
        from transformers import AttentionInterface

        p = artifact.params
        AttentionInterface.register(CAPTURE, capture_query)
        cfg = copy.deepcopy(auto_config(folder, recipe))
        cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = p.heads * p.head_dim, p.heads, p.heads, p.head_dim
        cfg._attn_implementation = CAPTURE
        self.attention = transformers_attr(recipe.module, recipe.attention)(cfg, recipe.layer).eval()
        with torch.no_grad():
            self.attention.q_proj.weight.copy_(torch.eye(p.heads * p.head_dim))
        self.p = p

    def scaled(self, rows: Any, start: int) -> Any:
        """[1, heads, seq, dim] of the layer for tokens at start, start + 1, …"""
        import torch

        with torch.no_grad():
            self.attention(rows, position_embeddings=None, attention_mask=None, cache=PastLength(start))
        return self.attention.captured_query

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        bshd = to_bshd(feeds["x"], self.p)
        out = torch.empty_like(bshd)
        for b, row in enumerate(np.asarray(feeds["position_ids"])):
            runs = np.split(np.arange(len(row)), np.flatnonzero(np.diff(row) != 1) + 1)
            for run in runs:
                tokens = bshd[b : b + 1, run[0] : run[-1] + 1].flatten(-2)
                out[b, run[0] : run[-1] + 1] = self.scaled(tokens, int(row[run[0]]))[0].transpose(0, 1)
        return from_bshd(out, self.p)


FAMILY = Family(("llama4", "llama4_text"), read, "rope, interleaved pairs, NoPE layers, query-scale", sessions={Llama4TemperatureRecipe: Llama4TemperatureSession})
