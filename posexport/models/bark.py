"""Bark (`bark`): three GPT-style sub-models (semantic, coarse acoustics, fine acoustics), each adding its
own trained `position_embeds_layer` table (block_size rows of its sub-config, default 1024) to its input
embeddings at 0-based position_ids (the semantic and coarse models' past length + token index, the fine
model's token index): three learned roles. Its codec (EnCodec) has no position encoding."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe

PARTS = ("semantic", "coarse_acoustics", "fine_acoustics")


def read(cfg: ModelConfig) -> list[Role]:
    return [part_role(cfg, part) for part in PARTS]


def part_role(cfg: ModelConfig, part: str) -> Role:
    data = cfg.get(f"{part}_config", {})
    if not isinstance(data, dict):
        cfg.fail(f"{part}_config", data, "expected an object (the sub-model's config)")
    sub = ModelConfig(data, f"bark {part}", f"{cfg.source} ({part}_config)", cfg.folder)
    rows = sub.count("block_size", 1024)
    sub.check_all_read()
    path, key = cfg.locate((f"{part}.position_embeds_layer.weight",))
    notes = (f"x is the {part} model's input embeddings [batch, seq, hidden]; position_ids are 0-based",
             f"its table holds block_size = {rows} rows")
    return Role(f"learned-{part}", "learned", {"weights": str(path), "key": key, "max_positions": rows, "row_offset": 0},
                (), notes, LearnedRecipe(key=key))


FAMILY = Family(("bark",), read, "learned table (one per sub-model)")
