"""What the rope readers share: heads and head size, the layer list, the contract notes, and the recipe
the `hf` runtime follows to run the model's own rotary code."""

from __future__ import annotations

from typing import Any

from .config import ModelConfig
from .plan import Role

CONTRACT = ("x is one head-split q or k, [batch, seq, heads, head_dim] (transpose transformers' [batch, heads, seq, "
            "head_dim]); position_ids are the model's own (0-based; with left padding cumsum(attention_mask) − 1)")


def heads_and_dim(cfg: ModelConfig, head_dim_default: int | None = None) -> tuple[int, int]:
    """(num_attention_heads, head_dim): head_dim when the config has it, else the architecture's default,
    else hidden_size // num_attention_heads."""
    heads = cfg.count("num_attention_heads")
    if cfg.has("head_dim"):
        return heads, cfg.count("head_dim")
    if head_dim_default is not None:
        return heads, head_dim_default
    return heads, cfg.count("hidden_size") // heads


def layers(cfg: ModelConfig, key: str = "num_hidden_layers") -> tuple[int, ...]:
    """Every layer; () when the config does not say how many (a trimmed config): the role then reads
    "every layer"."""
    return tuple(range(cfg.number(key, 0, integer=True)))


def kv_note(cfg: ModelConfig, heads: int) -> tuple[str, ...]:
    kv = cfg.get("num_key_value_heads", heads)
    if kv == heads:
        return ()
    return (f"keys have num_key_value_heads = {kv} heads: rotate them with a graph built with --heads {kv} "
            "(same tables), or fold heads into the batch",)


def hf_rope(module: str, rotary: str, apply: str = "apply_rotary_pos_emb", **extra: Any) -> dict[str, Any]:
    """The hf runtime's recipe: transformers.models.<module>'s rotary embedding class and its apply function."""
    return {"kind": "rope", "module": f"transformers.models.{module}", "rotary": rotary, "apply": apply, **extra}


def rope_role(values: dict[str, Any], cfg: ModelConfig, hf: dict[str, Any], role: str = "rope",
              layer_ids: tuple[int, ...] | None = None, notes: tuple[str, ...] = ()) -> Role:
    ids = layers(cfg) if layer_ids is None else layer_ids
    return Role(role, "rope", values, ids, (CONTRACT, *notes, *kv_note(cfg, values["heads"])), hf)
