"""Vision and audio towers that add a learned table over their trained token grid and never resample it, so
they take that input size only: the table's rows at position_ids 0 … rows − 1, posexport's learned table.
- over the patches alone (AIMv2's non-native tower, Ovis2's, EoMT's, VideoMT's): position_embedding(arange),
  (image_size // patch_size)² rows, patches in raster order; the class and register tokens EoMT and VideoMT put
  before the patches come after the table is added and take no position;
- over [class token | patches] (MGP-STR's pos_embed, image_size [h, w]) or [class, distillation tokens |
  frequency × time patches] (AST's position_embeddings, the patch counts from its strides), a [1, rows, hidden]
  parameter added to the whole sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe
from .vit import square


def square_grid(image: int, patch: int) -> Callable[[ModelConfig], int]:
    """(image_size // patch_size)² patches (the config class's defaults given)."""
    return lambda cfg: (square(cfg, "image_size", image) // square(cfg, "patch_size", patch)) ** 2


def mgp_str_tokens(cfg: ModelConfig) -> int:
    """A class token and (image_h / patch) × (image_w / patch) patches (MgpstrEmbeddings)."""
    if cfg.get("distilled", False) is not False:  # its table then has a row its forward never adds
        cfg.fail("distilled", cfg.get("distilled"), "MGP-STR's forward adds its table to one class token only")
    image, patch = cfg.get("image_size", [32, 128]), cfg.get("patch_size", 4)
    image = image if isinstance(image, list) else [image, image]
    patch = patch if isinstance(patch, list) else [patch, patch]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (*image, *patch)) or len(image + patch) != 4:
        cfg.fail("image_size", image, "expected positive integers, one or [height, width] (and so patch_size)")
    return (image[0] // patch[0]) * (image[1] // patch[1]) + 1


def ast_tokens(cfg: ModelConfig) -> int:
    """Class and distillation tokens and the frequency × time patches of ASTEmbeddings.get_shape."""
    patch = cfg.count("patch_size", 16)
    frequencies = (cfg.count("num_mel_bins", 128) - patch) // cfg.count("frequency_stride", 10) + 1
    frames = (cfg.count("max_length", 1024) - patch) // cfg.count("time_stride", 10) + 1
    return frequencies * frames + 2


@dataclass(frozen=True)
class PatchTable:
    table: str  # the table's path in the tower's own checkpoint
    bases: tuple[str, ...]  # its path's prefixes in a whole model's checkpoint
    rows: Callable[[ModelConfig], int]  # the table's rows, from the config
    added_to: str  # what the table is added to (the notes say)
    requires: tuple[tuple[str, object], ...] = ()  # config keys with the only value read (AIMv2's is_native)


PATCHES = "patch embeddings [batch, patches, hidden] (row-major)"
UNPOSITIONED = "; the class and register tokens go before them afterwards, without positions"
FAMILIES = {
    "aimv2_vision_model": PatchTable("embeddings.position_embedding.weight", ("vision_model",), square_grid(224, 14),
                                     f"the RMS-normed {PATCHES}", (("is_native", False),)),
    "ovis2_vision": PatchTable("transformer.embeddings.position_embedding.weight", ("model.vision_tower",),
                               square_grid(224, 14), f"the RMS-normed {PATCHES}"),
    "eomt": PatchTable("embeddings.position_embeddings.weight", (), square_grid(640, 16), f"the {PATCHES}{UNPOSITIONED}"),
    "videomt": PatchTable("embeddings.position_embeddings.weight", (), square_grid(640, 16),
                          f"each frame's {PATCHES}{UNPOSITIONED}"),
    "mgp-str": PatchTable("embeddings.pos_embed", ("mgp_str",), mgp_str_tokens,
                          "[class token | patches] [batch, 1 + patches, hidden]"),
    "audio-spectrogram-transformer": PatchTable(
        "embeddings.position_embeddings", ("audio_spectrogram_transformer",), ast_tokens,
        "[class, distillation tokens | frequency × time patches] [batch, 2 + patches, hidden]"),
}


def read(cfg: ModelConfig) -> list[Role]:
    family = FAMILIES[cfg.architecture]
    for key, value in family.requires:
        if cfg.get(key, value) != value:
            cfg.fail(key, cfg.get(key), f"only {value} is read (the learned table; AIMv2's native mode is a 2-D sincos)")
    rows = family.rows(cfg)
    path, key = cfg.locate((family.table, *(f"{base}.{family.table}" for base in family.bases)))
    notes = (f"x is {family.added_to}; position_ids are 0 … {rows - 1}, the table's rows",
             "the tower takes its trained input size only (it never resamples the table)")
    return [Role("learned", "learned", {"weights": str(path), "key": key, "max_positions": rows}, (), notes,
                 LearnedRecipe(key=key))]


FAMILY = Family(tuple(FAMILIES), read, "learned table (the trained token grid, not resampled)")
