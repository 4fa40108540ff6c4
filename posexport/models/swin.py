"""Swin: every block has its own trained relative-position bias table [(2W−1)², heads] over a W × W
window (config.window_size), added to the scaled window scores; one graph per block, named
`swin-s<stage>b<block>`, its table read from the checkpoint (transformers 5's
`…attention.relative_position_bias.relative_position_bias_table`, or the published
`…attention.self.relative_position_bias_table`, with or without the `swin.` prefix). Swin's absolute
table (`use_absolute_embeddings`, patches only, no class token) is a vit-learned role `swin-absolute`,
resampled as SwinEmbeddings does."""

from __future__ import annotations

from .. import checkpoint
from .config import ModelConfig
from .plan import Role
from .vit import grid_role

SPELLINGS = ("attention.relative_position_bias.relative_position_bias_table", "attention.self.relative_position_bias_table")
NOTES = ("scores are one block's scaled window scores q·kᵀ/√d, [batch·windows, heads, W², W²]; the shifted-window "
         "mask is the model's, outside this graph",)


ABSOLUTE_NOTES = ("x is the normalised patch embeddings as a grid [batch, grid_h, grid_w, embed_dim]; y likewise, "
                  "positions added (SwinEmbeddings before dropout; no class token)",)


def table_keys(stage: int, block: int) -> tuple[str, ...]:
    inner = [f"encoder.layers.{stage}.blocks.{block}.{s}" for s in SPELLINGS]
    return (*inner, *(f"swin.{k}" for k in inner))


def read(cfg: ModelConfig) -> list[Role]:
    window = cfg.number("window_size", 7, integer=True)
    depths, heads = cfg.get("depths", [2, 2, 6, 2]), cfg.get("num_heads", [3, 6, 12, 24])
    if not (isinstance(depths, list) and isinstance(heads, list) and len(depths) == len(heads)):
        cfg.fail("depths", depths, f"needs one entry per stage, like num_heads {heads!r}")
    roles, layer = [], 0
    if cfg.get("use_absolute_embeddings", False):
        keys = ("embeddings.position_embeddings", "swin.embeddings.position_embeddings")
        roles.append(grid_role(cfg, "swin.modeling_swin", "SwinEmbeddings", 0, keys, cfg.number("embed_dim", 96, integer=True),
                               ABSOLUTE_NOTES, "swin-absolute"))
    for stage, (count, stage_heads) in enumerate(zip(depths, heads)):
        for block in range(count):
            path, key = checkpoint.locate(cfg.folder, table_keys(stage, block))
            values = {"window_h": window, "window_w": window, "heads": stage_heads, "weights": str(path), "key": key}
            hf = {"kind": "swin", "key": key, "window": window}
            roles.append(Role(f"swin-s{stage}b{block}", "swin", values, (layer,), NOTES, hf))
            layer += 1
    return roles
