"""Rope parameters read the way transformers reads them (modeling_rope_utils): one rope block
(`rope_parameters` in transformers 5, `rope_scaling` before), its `rope_type` (or older `type`), rope_theta
and partial_rotary_factor inside the block or at the top level, and the scaling's own keys checked by
posexport.rope.config against the scaling's list.

transformers' rules followed here, beyond the block's keys:
- llama3, yarn and longrope take the block's `original_max_position_embeddings`, else
  max_position_embeddings; Phi-3 declares a top-level `original_max_position_embeddings` (default 4096),
  which wins over the block's. Elsewhere transformers ignores a top-level one: it is an error here;
- yarn without `factor` takes max_position_embeddings / original_max_position_embeddings;
- longrope's optional `factor` only sets the attention factor, √(1 + ln s / ln L0) for s > 1;
- rotary_dim = int(head_dim · partial_rotary_factor).
"""

from __future__ import annotations

from typing import Any

from ..rope import config as rope_config
from .config import ModelConfig

def block_kind(block: dict[str, Any]) -> str:
    return rope_config.block_type(block) or "default"


def scaled_block(cfg: ModelConfig, block: dict[str, Any], block_name: str, max_positions: int,
                 original_top: int | None) -> dict[str, Any]:
    """The block with transformers' implicit values made explicit (rope_config.implicit_values), in posexport's
    scaling terms; a top-level original_max_position_embeddings (Phi-3) wins over the block's."""
    block = {k: v for k, v in block.items() if v is not None}
    for key in ("rope_type", "type"):
        if not isinstance(block.get(key, ""), str):
            cfg.fail(key, block[key], "expected the name of a rope type")
    block["rope_type"] = block_kind(block)
    block.pop("type", None)
    return rope_config.implicit_values(block, block_name, cfg.source, max_positions, original_top)


def rope_values(
    cfg: ModelConfig,
    block: dict[str, Any] | None,
    *,
    head_dim: int,
    heads: int,
    max_positions: int,
    theta: float,
    partial: float | None = None,
    pair_layout: str = "half",
    block_name: str = "rope_parameters",
    original_top: int | None = None,
) -> dict[str, Any]:
    """Raw rope parameters (posexport build options) for one rope block. ``original_top``: the top-level
    original_max_position_embeddings of an architecture that declares one (Phi-3)."""
    if not isinstance(block, (dict, type(None))):
        cfg.fail(block_name, block, "expected an object with rope_type and its keys")
    block = dict(block or {})
    if original_top is None and cfg.has("original_max_position_embeddings"):
        cfg.fail("original_max_position_embeddings", cfg.get("original_max_position_embeddings"),
                 f"transformers' {cfg.architecture} ignores it at the top level (it reads "
                 f"{block_name}.original_max_position_embeddings, default max_position_embeddings); move it into {block_name}")
    theta = block.get("rope_theta", theta)
    partial = block.get("partial_rotary_factor", partial)
    values: dict[str, Any] = {"head_dim": head_dim, "heads": heads, "base": float(theta),
                              "max_positions": max_positions, "pair_layout": pair_layout}
    values.update(rope_config.scaling_values({}, block_name, scaled_block(cfg, block, block_name, max_positions, original_top), cfg.source))
    if partial is not None:
        if isinstance(partial, bool) or not isinstance(partial, (int, float)) or not 0 < partial <= 1:
            cfg.fail("partial_rotary_factor", partial, "expected a number in (0, 1]")
        param, value = rope_config.partial_rotary(values, partial)
        values[param] = value
    return values


def top_block(cfg: ModelConfig) -> tuple[str, dict[str, Any] | None]:
    """transformers 5's `rope_parameters` or the older `rope_scaling`; both at once is an error (transformers
    silently takes rope_scaling)."""
    present = [name for name in rope_config.BLOCK_NAMES if cfg.has(name)]
    if len(present) == 2:
        cfg.fail("rope_scaling", cfg.get("rope_scaling"), rope_config.BOTH_BLOCKS)
    name = present[0] if present else "rope_parameters"
    block = cfg.get(name, None)
    if not isinstance(block, (dict, type(None))):
        cfg.fail(name, block, "expected an object with rope_type and its keys")
    return name, block
