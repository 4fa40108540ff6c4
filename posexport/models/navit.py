"""NaViT-style vision towers (Idefics2's, Idefics3's, SmolVLM's and Phi-4-multimodal's; MiniCPM-V 4.6's, 4.7's
and MiniCPM-o-OCR's): a learned table over a square grid of N = image_size // patch_size a side, of which each
image of h × w patches takes, for patch (i, j), the row bucket(i of h)·N + bucket(j of w), where bucket puts the
patch's fractional coordinate into torch.bucketize(·, torch.arange(1/N, 1, 1/N), right=True): the bucket of the
trained grid it falls in, never interpolated (rows repeat when h > N). That is vit-learned's nearest-bucket, one
one-hot selection per axis.

transformers forms the fractional coordinate in float32 two ways, whose buckets differ at some edges (and are
not always the identity at the trained size): Idefics2VisionEmbeddings.forward (and its copies in Idefics3,
SmolVLM, Phi-4-multimodal) as i·(1/h) clamped to 1 − 1e-6 (--bucket-fractions reciprocal);
get_vision_nearest_position_ids (MiniCPM-V's embeddings) as i/h (quotient). Both against the boundaries that
PyTorch's CPU arange forms.

The graph takes one image's patch embeddings as a grid [batch, grid_h, grid_w, hidden] (raster order); the padding
patches of a batch of smaller images (patch_attention_mask false, given row 0) are not the graph's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family
from .hf_code import auto_config, torch_float, trained
from .plan import Role
from .recipes import EMBEDDINGS, Recipe
from .vit import CLIP_TABLE, DEFAULT_MAX_GRID, GRID_NOTES, square


@dataclass(frozen=True)
class NavitTower:
    module: str  # transformers.models.<module>
    embeddings: str  # the class holding the table and computing the position ids
    fractions: str  # how it forms a patch's fractional coordinate (vit-learned's bucket_fractions)
    base: str  # the tower's path in its whole model's checkpoint
    sizes: tuple[int, int]  # the config class's image_size and patch_size defaults


IDEFICS2 = "Idefics2VisionEmbeddings.forward: i·(1/h) clamped to 1 − 1e-6"
MINICPM = "get_vision_nearest_position_ids: i/h"
FAMILIES = {
    "idefics2_vision": NavitTower("idefics2.modeling_idefics2", "Idefics2VisionEmbeddings", "reciprocal",
                                  "model.vision_model", (224, 32)),
    "idefics3_vision": NavitTower("idefics3.modeling_idefics3", "Idefics3VisionEmbeddings", "reciprocal",
                                  "model.vision_model", (224, 32)),
    "smolvlm_vision": NavitTower("smolvlm.modeling_smolvlm", "SmolVLMVisionEmbeddings", "reciprocal", "model.vision_model",
                                 (224, 32)),
    "phi4_multimodal_vision": NavitTower("phi4_multimodal.modeling_phi4_multimodal", "Phi4MultimodalVisionEmbeddings",
                                         "reciprocal", "model.embed_tokens_extend.image_embed.img_processor", (448, 14)),
    "minicpm_ocr_vision": NavitTower("minicpm_ocr.modeling_minicpm_ocr", "MiniCPMOcrVisionEmbeddings", "quotient",
                                     "model.vision_tower", (224, 16)),
    "minicpmv4_6_vision": NavitTower("minicpmv4_6.modeling_minicpmv4_6", "MiniCPMV4_6VisionEmbeddings", "quotient",
                                     "model.vision_tower", (224, 16)),
    "minicpmv4_7_vision": NavitTower("minicpmv4_7.modeling_minicpmv4_7", "MiniCPMV4_7VisionEmbeddings", "quotient",
                                     "model.vision_tower", (224, 16)),
}


def read(cfg: ModelConfig) -> list[Role]:
    tower = FAMILIES[cfg.architecture]
    side = square(cfg, "image_size", tower.sizes[0]) // square(cfg, "patch_size", tower.sizes[1])
    if side < 1:
        cfg.fail("patch_size", cfg.get("patch_size"), "larger than image_size: the tower's table would have no rows")
    path, key = cfg.locate((f"embeddings.{CLIP_TABLE}", f"{tower.base}.embeddings.{CLIP_TABLE}"))
    values = {"dim": cfg.count("hidden_size", 768), "trained_h": side, "trained_w": side, "interpolation": "nearest-bucket",
              "bucket_fractions": tower.fractions, "antialias": False, "max_grid": max(side, DEFAULT_MAX_GRID),
              "weights": str(path), "key": key}
    notes = (*GRID_NOTES, f"each patch takes the table row of its fractional coordinate's bucket on the {side} × {side} "
                          f"grid, as {IDEFICS2 if tower.fractions == 'reciprocal' else MINICPM} (float32, bucketize); "
                          "patches in raster order, a batch's padding patches left out")
    hf = NavitRecipe(key=key, module=f"transformers.models.{tower.module}", embeddings=tower.embeddings,
                     target_sizes=tower.fractions == "quotient")
    return [Role("vit-learned", "vit-learned", values, (), notes, hf)]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class NavitRecipe(Recipe):
    """A NaViT tower's embeddings class, its table from the checkpoint; MiniCPM-V's takes each image's target_sizes."""

    kind: ClassVar[str] = "navit"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"embeddings": EMBEDDINGS}

    module: str
    embeddings: str
    key: str
    target_sizes: bool = False


class NavitSession(Session):
    """A NaViT tower's own embeddings forward on the model's trained table, its patch projection the identity (x's
    patches are its pixels, one pixel a patch): Idefics2's with every patch of the grid unmasked, MiniCPM-V's image by
    image with its (h, w) as target_sizes."""

    def __init__(self, artifact: Artifact, recipe: NavitRecipe, folder: Path):
        import torch

        self.embeddings = transformers_attr(recipe.module, recipe.embeddings)(auto_config(folder, recipe)).eval()
        table = self.embeddings.position_embedding.weight
        table.data = trained(folder, recipe.key).reshape(table.shape)
        self.embeddings.patch_embedding, self.embeddings.patch_size = torch.nn.Identity(), 1
        self.target_sizes = bool(recipe.target_sizes)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        pixels = x.permute(0, 3, 1, 2)  # [batch, hidden, h, w]: the forward's flatten(2).transpose(1, 2) gives x's patches
        with torch.no_grad():
            if self.target_sizes:  # MiniCPM-V packs its images into one sequence: one image a call
                y = torch.cat([self.embeddings(pixels[b : b + 1], target_sizes=torch.tensor([[h, w]])) for b in range(batch)])
            else:
                y = self.embeddings(pixels, patch_attention_mask=torch.ones(batch, h, w, dtype=torch.bool))
        return y.reshape(batch, h, w, dim).numpy()


FAMILY = Family(tuple(FAMILIES), read, "vit-learned (nearest-bucket: each patch the row of its fractional coordinate's bucket)", sessions={NavitRecipe: NavitSession})
