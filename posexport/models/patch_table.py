"""Vision towers that add a learned table over the trained patch grid and never resample it (AIMv2's
non-native tower, Ovis2's, EoMT's, VideoMT's): `<X>Embeddings` adds position_embedding(arange) — one row
per patch, (image_size // patch_size)² rows, patches in raster order — so the tower takes that image size
only. That is posexport's learned table at position_ids 0 … patches − 1 on the patch sequence; the class and
register tokens EoMT and VideoMT put before the patches come after the table is added and take no position.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import checkpoint
from .config import ModelConfig
from .plan import Role
from .vit import square


@dataclass(frozen=True)
class PatchTable:
    table: str  # the table's path in the tower's own checkpoint
    bases: tuple[str, ...]  # its path's prefixes in a whole model's checkpoint
    sizes: tuple[int, int]  # the config class's image_size and patch_size defaults
    after: str  # what the table is added to (the notes say)
    requires: tuple[tuple[str, object], ...] = ()  # config keys with the only value read (AIMv2's is_native)


FAMILIES = {
    "aimv2_vision_model": PatchTable("embeddings.position_embedding.weight", ("vision_model",), (224, 14),
                                     "the RMS-normed patch embeddings", (("is_native", False),)),
    "ovis2_vision": PatchTable("transformer.embeddings.position_embedding.weight", ("model.vision_tower",), (224, 14),
                               "the RMS-normed patch embeddings"),
    "eomt": PatchTable("embeddings.position_embeddings.weight", (), (640, 16),
                       "the patch embeddings; the class and register tokens go before them afterwards, without positions"),
    "videomt": PatchTable("embeddings.position_embeddings.weight", (), (640, 16),
                          "each frame's patch embeddings; the class and register tokens go before them afterwards, "
                          "without positions"),
}


def read(cfg: ModelConfig) -> list[Role]:
    family = FAMILIES[cfg.architecture]
    for key, value in family.requires:
        if cfg.get(key, value) != value:
            cfg.fail(key, cfg.get(key), f"only {value} is read (the learned table; AIMv2's native mode is a 2-D sincos)")
    patches = (square(cfg, "image_size", family.sizes[0]) // square(cfg, "patch_size", family.sizes[1])) ** 2
    path, key = checkpoint.locate(cfg.folder, (family.table, *(f"{base}.{family.table}" for base in family.bases)))
    notes = (f"x is {family.after} [batch, patches, hidden] (row-major); position_ids are 0 … patches − 1",
             f"the tower takes its trained image size only: {patches} patches, the table's rows (it never resamples)")
    return [Role("learned", "learned", {"weights": str(path), "key": key, "max_positions": patches}, (), notes,
                 {"kind": "learned", "key": key})]
