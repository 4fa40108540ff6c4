"""Gemma-4 (`gemma4`, its `gemma4_text`): one rope per layer type, read from `rope_parameters` keyed by
layer type (defaults: sliding_attention plain with base 1e4; full_attention `proportional` with
partial_rotary_factor 0.25 and base 1e6), each with its own head size: `per_layer_config` overrides
head_dim per layer (full-attention layers default to `global_head_dim`, 512). transformers forces the
last layer to full_attention; the reader does the same. Its apply function rotates one tensor half-split.

Gemma-4's assistant (drafter, `gemma4_assistant`) is a Gemma-4 text model (its text_config) between projections
whose every layer reuses the target model's keys and values (its config class sets num_kv_shared_layers to
num_hidden_layers): the same ropes, turning its queries alone."""

from __future__ import annotations

from typing import Any

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import LAYER_ROLES, hf_rope, rope_role, text_part
from .rope_reading import rope_values

FULL, SLIDING = "full_attention", "sliding_attention"
ASSISTANT = ("Gemma-4's assistant rotates its queries alone: every layer's keys are the target model's shared keys, "
             "rotated there (num_kv_shared_layers = num_hidden_layers)",)
DEFAULT_BLOCKS = {SLIDING: {"rope_type": "default", "rope_theta": 10000.0},
                  FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}


def read(cfg: ModelConfig) -> list[Role]:
    text = text_part(cfg)
    heads = text.number("num_attention_heads", 8, integer=True)
    count = text.number("num_hidden_layers", 30, integer=True)
    types = list(text.get("layer_types", None) or [FULL if (i + 1) % 6 == 0 else SLIDING for i in range(count)])
    if len(types) != count or set(types) - {FULL, SLIDING}:
        text.fail("layer_types", types, f"expected {count} of {SLIDING!r} and {FULL!r}")
    types[-1] = FULL  # transformers' Gemma4TextConfig forces it
    text.ignore("sliding_window", "sliding_window_pattern")
    sizes = head_dims(text, types)
    blocks = text.get("rope_parameters", None) or DEFAULT_BLOCKS
    if not isinstance(blocks, dict) or set(blocks) - {FULL, SLIDING}:
        text.fail("rope_parameters", blocks, f"Gemma-4 reads its {SLIDING!r} and {FULL!r} entries")
    roles = []
    for kind in (SLIDING, FULL):
        ids = tuple(i for i, t in enumerate(types) if t == kind)
        if not ids or blocks.get(kind) is None:
            continue
        values = rope_values(text, blocks[kind], head_dim=sizes[kind], heads=heads, block_name=f"rope_parameters.{kind}",
                             max_positions=text.number("max_position_embeddings", 131072, integer=True),
                             theta=DEFAULT_BLOCKS[kind]["rope_theta"])
        hf = hf_rope("gemma4.modeling_gemma4", "Gemma4TextRotaryEmbedding", layer_type=kind, text_config=text is not cfg,
                     single_apply=True)
        notes = (f"{kind.replace('_', ' ')} layers, head_dim {sizes[kind]}", *(ASSISTANT if cfg.architecture == "gemma4_assistant" else ()))
        roles.append(rope_role(values, text, hf, LAYER_ROLES[kind], ids, notes))
    if text is not cfg:
        text.check_all_read()
    return roles


def head_dims(cfg: ModelConfig, types: list[str]) -> dict[str, int]:
    """Each layer type's head size: head_dim, per_layer_config's overrides, global_head_dim for full layers."""
    base, global_dim = cfg.number("head_dim", 256, integer=True), cfg.number("global_head_dim", 512, integer=True)
    overrides: dict[str, Any] = cfg.get("per_layer_config", None) or {str(i): {"head_dim": global_dim} for i, t in enumerate(types) if t == FULL}
    sizes: dict[str, set[int]] = {FULL: set(), SLIDING: set()}
    for i, kind in enumerate(types):
        entry = overrides.get(str(i)) or overrides.get(f"{i:02d}") or overrides.get(i) or {}
        sizes[kind].add(entry.get("head_dim", base))
    for kind, found in sizes.items():
        if len(found) > 1:
            cfg.fail("per_layer_config", overrides, f"the {kind} layers have head sizes {sorted(found)}; one rope per layer type needs one")
    return {kind: next(iter(found), base) for kind, found in sizes.items()}


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "its rotary class forms inv_freq its own way (not transformers' default rope init): checked to differ, "
    "not modelled": ("embedding_gemma2", "embedding_gemma2_text", "diffusion_gemma", "diffusion_gemma_text",
                     "gemma4_unified", "gemma4_unified_text", "gemma4_unified_assistant"),
}


FAMILY = Family(("gemma4", "gemma4_text", "gemma4_assistant"), read, "rope per layer type (full: proportional; the assistant's: on its queries alone)", pending=PENDING)
