"""BLOOM and MPT: ALiBi, no parameters beyond the head count; causal decoders.

Both models add a bias that grows with the key's position (BLOOM slope_h·j, MPT slope_h·(j − k_len + 1));
posexport's causal alibi adds −slope_h·(i − j) with −inf above the diagonal. Per query row the two
differ by a constant, which softmax removes, so the attention is the same. Slopes and head order are
posexport's: BLOOM's _get_alibi_slopes, and MPT's with alibi_bias_max = 8 (its default; another value is
an error, as posexport's alibi has no such parameter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import POSITION_WORDS, ModelConfig
from .family import Family
from .hf_code import torch_float
from .plan import Role
from .recipes import Recipe, RecipeError

ROW_SHIFT = ("the model adds slope·(key position) — equal to the graph's −slope·(i − j) up to a per-query constant "
             "that softmax removes; the causal mask is in the graph (−inf above the diagonal)")
MPT_BIAS_MAX = 8


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture == "bloom":
        heads = cfg.number("n_head", cfg.get("num_attention_heads", 8), integer=True)
        cfg.ignore("num_attention_heads")
        layers = tuple(range(cfg.number("n_layer", cfg.get("num_hidden_layers", 2), integer=True)))
        cfg.ignore("num_hidden_layers")
        notes = ("scores are BLOOM's scaled q·kᵀ/√d, [batch, heads, q_len, k_len]", ROW_SHIFT)
        return [Role("alibi", "alibi", {"heads": heads, "causal": True}, layers, notes, AlibiRecipe(model="bloom"))]
    heads = cfg.number("n_heads", 16, integer=True)
    attn = cfg.get("attn_config", {}) or {}
    bias_max = attn.get("alibi_bias_max", MPT_BIAS_MAX)
    if bias_max != MPT_BIAS_MAX:
        cfg.fail("attn_config.alibi_bias_max", bias_max, f"posexport's alibi has MPT's default slopes (alibi_bias_max = {MPT_BIAS_MAX}) only")
    for key, value in attn.items():
        if key not in ("alibi", "alibi_bias_max") and value not in (None, False) and POSITION_WORDS.search(key):
            cfg.fail(f"attn_config.{key}", value, "posexport reads MPT's alibi only")
    if attn.get("alibi") is False:
        cfg.fail("attn_config.alibi", False, "transformers' MPT adds alibi whatever this says; fix the config")
    # transformers' MPT never uses a learned position table, whatever learned_pos_emb says.
    cfg.ignore("learned_pos_emb")
    max_len = cfg.number("max_seq_len", 2048, integer=True)
    notes = ("scores are MPT's scaled q·kᵀ·softmax_scale, [batch, heads, q_len, k_len]", ROW_SHIFT,
             f"MPT's own bias covers k_len ≤ max_seq_len = {max_len}; the graph covers any length")
    layers = tuple(range(cfg.number("n_layers", 24, integer=True)))
    return [Role("alibi", "alibi", {"heads": heads, "causal": True}, layers, notes,
                 AlibiRecipe(model="mpt", max_seq_len=max_len))]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class AlibiRecipe(Recipe):
    """BLOOM's or MPT's own alibi builder; MPT's at its max_seq_len."""

    kind: ClassVar[str] = "alibi"

    model: str
    max_seq_len: int = 0

    def check(self) -> None:
        if self.model not in ("bloom", "mpt"):
            raise RecipeError(f"recipe model {self.model!r} is not one of bloom, mpt")


class AlibiSession(Session):
    """BLOOM's build_alibi_tensor or MPT's build_mpt_alibi_tensor (sliced to k_len as MPT's attention does),
    shifted per query row by the bias at the query's own position, with the causal mask: the graph's form
    of the same attention (softmax removes the per-row constant)."""

    def __init__(self, artifact: Artifact, recipe: AlibiRecipe, folder: Path):
        self.recipe, self.heads = recipe, artifact.params.heads

    def model_bias(self, k_len: int) -> Any:
        import torch

        if self.recipe.model == "bloom":
            build_alibi_tensor = transformers_attr("transformers.models.bloom.modeling_bloom", "build_alibi_tensor")
            return build_alibi_tensor(torch.ones(1, k_len), self.heads, torch.float32)  # [heads, 1, k_len]
        build_mpt_alibi_tensor = transformers_attr("transformers.models.mpt.modeling_mpt", "build_mpt_alibi_tensor")

        # MPT builds max_seq_len columns and keeps the last k_len; past it, the same function made longer.
        full = max(self.recipe.max_seq_len, k_len)
        return build_mpt_alibi_tensor(self.heads, full)[:, :, full - k_len :].float()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        scores = torch_float(feeds["scores"])
        q_len, k_len = scores.shape[-2:]
        with torch.no_grad():
            bias = self.model_bias(k_len)  # [heads, 1, k_len]
            queries = torch.arange(k_len - q_len, k_len)
            shifted = bias - bias[:, 0, queries].unsqueeze(-1)  # [heads, q_len, k_len]
            future = torch.arange(k_len)[None, :] > queries[:, None]
            shifted = shifted.masked_fill(future, float("-inf"))
        return (scores + shifted).numpy()


FAMILY = Family(("bloom", "mpt"), read, "alibi", sessions={AlibiRecipe: AlibiSession})
