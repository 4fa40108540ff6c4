"""BLOOM and MPT: ALiBi, no parameters beyond the head count; causal decoders.

Both models add a bias that grows with the key's position (BLOOM slope_h·j, MPT slope_h·(j − k_len + 1));
posexport's causal alibi adds −slope_h·(i − j) with −inf above the diagonal. Per query row the two
differ by a constant, which softmax removes, so the attention is the same. Slopes and head order are
posexport's: BLOOM's _get_alibi_slopes, and MPT's with alibi_bias_max = 8 (its default; another value is
an error, as posexport's alibi has no such parameter).
"""

from __future__ import annotations

from .config import POSITION_WORDS, ModelConfig
from .family import Family
from .plan import Role

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
        return [Role("alibi", "alibi", {"heads": heads, "causal": True}, layers, notes, {"kind": "alibi", "model": "bloom"})]
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
                 {"kind": "alibi", "model": "mpt", "max_seq_len": max_len})]


FAMILY = Family(("bloom", "mpt"), read, "alibi")
