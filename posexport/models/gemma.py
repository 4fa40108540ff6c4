"""Gemma, Gemma-2 (one rope for every layer) and Gemma-3 (two: sliding-window layers rotate with the
local base, full-attention layers with the global base and, in published configs, a linear factor).

Gemma-3 read as transformers reads it: transformers 5 writes `rope_parameters` per layer type
({"sliding_attention": {...}, "full_attention": {...}}); published configs say `rope_theta` (global,
default 1e6), `rope_local_base_freq` (local, default 1e4) and `rope_scaling` (full attention only).
Layer types come from `layer_types`, else `sliding_window_pattern` (default 6): layer i slides unless
(i + 1) is a multiple of the pattern. A multimodal `gemma3` folder is read through its `text_config`;
with its weights, the SigLIP vision tower's learned patch-grid table is a vit-learned role
`vision-positions` (no class token), resampled as SiglipVisionEmbeddings does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import checkpoint
from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import heads_and_dim, hf_rope, rope_role
from .rope_reading import rope_values, top_block
from .vit import grid_role

SLIDING, FULL = "sliding_attention", "full_attention"
ROLES = {SLIDING: "rope-local", FULL: "rope-global"}
THETA = {SLIDING: 10000.0, FULL: 1000000.0}


# transformers 5's names, then the published ones.
VISION_TABLE = ("vision_tower.embeddings.position_embedding.weight", "model.vision_tower.embeddings.position_embedding.weight",
                "vision_tower.vision_model.embeddings.position_embedding.weight",
                "model.vision_tower.vision_model.embeddings.position_embedding.weight")
VISION_NOTES = ("x is the vision tower's patch embeddings as a grid [batch, grid_h, grid_w, hidden]; y likewise, "
                "positions added (SiglipVisionEmbeddings; no class token)",)


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture == "gemma3":
        roles = read_gemma3(text_config(cfg), text=True)
        if not checkpoint.has_weights(cfg.folder):
            note = "the vision tower's position table is in the weights, which this folder lacks: not built"
            return [dataclasses.replace(r, notes=(*r.notes, note)) for r in roles]
        vision = ModelConfig(cfg.get("vision_config"), "gemma3", f"{cfg.source} vision_config", cfg.folder)
        return [*roles, grid_role(vision, "siglip.modeling_siglip", "SiglipVisionEmbeddings", 0, VISION_TABLE,
                                  vision.number("hidden_size", 1152, integer=True), VISION_NOTES, "vision-positions",
                                  vision_config=True, table="position_embedding.weight")]
    if cfg.architecture == "gemma3_text":
        return read_gemma3(cfg, text=False)
    prefix = {"gemma": "Gemma", "gemma2": "Gemma2"}[cfg.architecture]
    heads, head_dim = heads_and_dim(cfg, 256)
    cfg.ignore("sliding_window", "query_pre_attn_scalar")
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=head_dim, heads=heads, block_name=name,
                         max_positions=cfg.number("max_position_embeddings", 8192, integer=True),
                         theta=cfg.number("rope_theta", 10000.0))
    module = cfg.architecture
    return [rope_role(values, cfg, hf_rope(f"{module}.modeling_{module}", f"{prefix}RotaryEmbedding"))]


def text_config(cfg: ModelConfig) -> ModelConfig:
    data = cfg.get("text_config")
    cfg.ignore("vision_config", "mm_tokens_per_image", "boi_token_index", "eoi_token_index", "image_token_index")
    if not isinstance(data, dict):
        cfg.fail("text_config", data, "expected an object")
    text = ModelConfig(data, "gemma3", f"{cfg.source} text_config", cfg.folder)
    return text


def layer_types(cfg: ModelConfig) -> list[str]:
    count = cfg.number("num_hidden_layers", 26, integer=True)
    if cfg.has("layer_types"):
        types = cfg.get("layer_types")
        if not isinstance(types, list) or len(types) != count or set(types) - {SLIDING, FULL}:
            cfg.fail("layer_types", types, f"expected {count} entries of {SLIDING!r} or {FULL!r}")
        cfg.ignore("sliding_window_pattern", "_sliding_window_pattern")
        return types
    pattern = cfg.number("sliding_window_pattern", cfg.get("_sliding_window_pattern", 6), integer=True)
    return [SLIDING if (i + 1) % pattern else FULL for i in range(count)]


def blocks(cfg: ModelConfig) -> dict[str, dict[str, Any]]:
    """The rope block of each layer type, built as transformers 5's Gemma3TextConfig builds it."""
    nested = cfg.get("rope_parameters", None) or {}
    if not isinstance(nested, dict) or set(nested) - {SLIDING, FULL}:
        cfg.fail("rope_parameters", nested, f"Gemma-3 reads only its {SLIDING!r} and {FULL!r} entries")
    scaling = cfg.get("rope_scaling", None)
    if not isinstance(scaling, (dict, type(None))):
        cfg.fail("rope_scaling", scaling, "expected an object with rope_type and its keys")
    full = {**(nested.get(FULL) or {"rope_type": "default"}), **(scaling or {})}
    full.setdefault("rope_theta", cfg.number("rope_theta", THETA[FULL]))
    local = dict(nested.get(SLIDING) or {"rope_type": "default"})
    local.setdefault("rope_theta", cfg.number("rope_local_base_freq", THETA[SLIDING]))
    cfg.ignore("rope_theta", "rope_local_base_freq")
    return {SLIDING: local, FULL: full}


def read_gemma3(cfg: ModelConfig, text: bool) -> list[Role]:
    heads, head_dim = heads_and_dim(cfg, 256)
    cfg.ignore("sliding_window", "query_pre_attn_scalar")
    types = layer_types(cfg)
    max_positions = cfg.number("max_position_embeddings", 131072, integer=True)
    roles = []
    for kind, block in blocks(cfg).items():
        ids = tuple(i for i, t in enumerate(types) if t == kind)
        if not ids:
            continue
        values = rope_values(cfg, block, head_dim=head_dim, heads=heads, max_positions=max_positions,
                             theta=THETA[kind], block_name=f"rope_parameters.{kind}")
        hf = hf_rope("gemma3.modeling_gemma3", "Gemma3RotaryEmbedding", layer_type=kind, text_config=text)
        roles.append(rope_role(values, cfg, hf, ROLES[kind], ids, (f"{kind.replace('_', ' ')} layers",)))
    if text:
        cfg.check_all_read()
    return roles


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "T5Gemma-2: Gemma-3-style rope per layer type in its text encoder and decoder (t5gemma2_text, "
    "t5gemma2_decoder; the encoder beside a SigLIP tower that is read), which have no reader line yet":
        ("t5gemma2", "t5gemma2_encoder", "t5gemma2_decoder", "t5gemma2_text"),
}


FAMILY = Family(("gemma", "gemma2", "gemma3", "gemma3_text"), read, "rope (Gemma-3: one per layer type)", pending=PENDING)
