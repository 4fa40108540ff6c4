"""What the rope readers share: heads and head size, the layer list, the contract notes, and the recipe
the `hf` runtime follows to run the model's own rotary code."""

from __future__ import annotations

from typing import Any

from .config import ModelConfig
from .plan import Role
from .recipes import Recipe, RopeRecipe

# Roles of rope_parameters keyed by layer type, named as Gemma-3's.
LAYER_ROLES = {"sliding_attention": "rope-local", "full_attention": "rope-global"}
# Keys of a multimodal config beside its text_config that say nothing about the text model's positions.
BESIDE_TEXT = ("vision_config", "audio_config", "mm_tokens_per_image", "boi_token_index", "eoi_token_index",
               "image_token_index", "image_token_id", "video_token_id", "vision_start_token_id",
               "vision_end_token_id", "vision_token_id", "audio_token_id")

CONTRACT = ("x is one head-split q or k, [batch, seq, heads, head_dim] (transpose transformers' [batch, heads, seq, "
            "head_dim]); position_ids are the model's own (0-based; with left padding cumsum(attention_mask) − 1)")


def text_part(cfg: ModelConfig) -> ModelConfig:
    """A multimodal config's `text_config`, read as its own config (its keys checked when the reader is
    done with it); the top level when there is none (a text-only folder of the same model type)."""
    if not cfg.has("text_config"):
        return cfg
    data = cfg.get("text_config")
    cfg.ignore(*BESIDE_TEXT)
    if not isinstance(data, dict):
        cfg.fail("text_config", data, "expected an object")
    return ModelConfig(data, cfg.architecture, f"{cfg.source} text_config", cfg.folder)


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


def hf_rope(module: str, rotary: str, apply: str = "apply_rotary_pos_emb", **extra: Any) -> RopeRecipe:
    """The hf runtime's recipe: transformers.models.<module>'s rotary embedding class and its apply function."""
    return RopeRecipe(module=f"transformers.models.{module}", rotary=rotary, apply=apply, **extra)


def rope_role(values: dict[str, Any], cfg: ModelConfig, hf: Recipe, role: str = "rope",
              layer_ids: tuple[int, ...] | None = None, notes: tuple[str, ...] = ()) -> Role:
    ids = layers(cfg) if layer_ids is None else layer_ids
    return Role(role, "rope", values, ids, (CONTRACT, *notes, *kv_note(cfg, values["heads"])), hf)
