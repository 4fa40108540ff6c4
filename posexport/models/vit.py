"""ViT (`vit`): learned positions of the trained patch grid, image_size // patch_size on each side, after a
class-token row; transformers' ViTEmbeddings resamples the grid part to other image sizes with
interpolate_pos_encoding (bicubic, align_corners=False, no antialias: Keys a = −0.75).

The graph takes the patch embeddings as a grid [batch, grid_h, grid_w, hidden] and the class token
[batch, 1, hidden] and returns the token sequence with positions added, as ViTEmbeddings does before
dropout. The graph resamples the same way (vit-learned with --antialias false --cubic-coefficient -0.75).
"""

from __future__ import annotations

from .. import checkpoint
from .config import ModelConfig
from .plan import Role

KEYS = ("embeddings.position_embeddings", "vit.embeddings.position_embeddings")
NOTES = ("x is the patch embeddings as a grid [batch, grid_h, grid_w, hidden] (row-major patches); cls is the class "
         "token [batch, 1, hidden]; y is [batch, 1 + grid_h·grid_w, hidden] as ViTEmbeddings returns it (before dropout)",
         "other grids are resampled as ViTEmbeddings does with interpolate_pos_encoding=True (plain bicubic, a = −0.75)")


def read(cfg: ModelConfig) -> list[Role]:
    image, patch = cfg.number("image_size", 224, integer=True), cfg.number("patch_size", 16, integer=True)
    side = image // patch
    path, key = checkpoint.locate(cfg.folder, KEYS)
    values = {"dim": cfg.number("hidden_size", 768, integer=True), "trained_h": side, "trained_w": side,
              "class_token": True, "cubic_coefficient": -0.75, "antialias": False, "weights": str(path), "key": key}
    hf = {"kind": "vit", "key": key, "patch_size": patch}
    return [Role("vit-learned", "vit-learned", values, (), NOTES, hf)]
