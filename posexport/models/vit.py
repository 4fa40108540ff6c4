"""ViT (`vit`) and DeiT (`deit`): learned positions of the trained patch grid, image_size // patch_size on
each side, after a class-token row (DeiT: and a distillation-token row); transformers' ViTEmbeddings /
DeiTEmbeddings resample the grid part to other image sizes with interpolate_pos_encoding (bicubic,
align_corners=False, no antialias: Keys a = −0.75).

The graph takes the patch embeddings as a grid [batch, grid_h, grid_w, hidden] and the class token
[batch, 1, hidden] and returns the token sequence with positions added, as ViTEmbeddings does before
dropout. The graph resamples the same way (vit-learned with --antialias false --cubic-coefficient -0.75).
"""

from __future__ import annotations

from .. import checkpoint
from .config import ModelConfig
from .plan import Role

# model_type -> (transformers module, embeddings class, tokens before the grid)
FAMILIES = {"vit": ("vit.modeling_vit", "ViTEmbeddings", 1), "deit": ("deit.modeling_deit", "DeiTEmbeddings", 2)}
NOTES = ("x is the patch embeddings as a grid [batch, grid_h, grid_w, hidden] (row-major patches); cls is the class "
         "token (DeiT: then the distillation token) [batch, tokens, hidden]; y is [batch, tokens + grid_h·grid_w, "
         "hidden] as the embeddings module returns it (before dropout)",
         "other grids are resampled as ViTEmbeddings does with interpolate_pos_encoding=True (plain bicubic, a = −0.75)")


def read(cfg: ModelConfig) -> list[Role]:
    module, embeddings, prefix = FAMILIES[cfg.architecture]
    keys = ("embeddings.position_embeddings", f"{cfg.architecture}.embeddings.position_embeddings")
    return [grid_role(cfg, module, embeddings, prefix, keys, cfg.number("hidden_size", 768, integer=True), NOTES)]


def grid_role(cfg: ModelConfig, module: str, embeddings: str, prefix: int, keys: tuple[str, ...], dim: int,
              notes: tuple[str, ...], role: str = "vit-learned", **recipe: object) -> Role:
    """A learned patch-grid table (image_size // patch_size on each side, after ``prefix`` token rows)
    resampled as the model's <embeddings>.interpolate_pos_encoding does (plain bicubic, a = −0.75)."""
    image, patch = cfg.number("image_size", 224, integer=True), cfg.number("patch_size", 16, integer=True)
    side = image // patch
    path, key = checkpoint.locate(cfg.folder, keys)
    values = {"dim": dim, "trained_h": side, "trained_w": side, "class_token": prefix >= 1,
              "distillation_token": prefix == 2, "cubic_coefficient": -0.75, "antialias": False,
              "weights": str(path), "key": key}
    hf = {"kind": "vit", "key": key, "patch_size": patch, "module": f"transformers.models.{module}", "embeddings": embeddings,
          **recipe}
    return Role(role, "vit-learned", values, (), notes, hf)
