"""SigLIP-2's NaFlex vision tower (`siglip2_vision_model`): a learned grid of num_patches rows, √num_patches a
side, that Siglip2VisionEmbeddings.resize_positional_embeddings resamples to each image's own (h, w) patch grid
with the weights of F.interpolate(mode="bilinear", align_corners=False, antialias=True), computed in float32 —
vit-learned's antialiased bilinear without a class token. It resamples the trained grid too, which those weights
leave unchanged.

The graph takes one image's patch embeddings as a grid [batch, grid_h, grid_w, hidden] (its patches in raster
order, as the processor packs them); the processor's padding patches past h·w are not the graph's.
"""

from __future__ import annotations

import math
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
from .vit import CLIP_TABLE, DEFAULT_MAX_GRID, GRID_NOTES, TABLE


def read(cfg: ModelConfig) -> list[Role]:
    patches = cfg.count("num_patches", 256)
    side = math.isqrt(patches)
    if side * side != patches:
        cfg.fail("num_patches", patches, "its table is reshaped to a square grid (√num_patches a side): expected a "
                                         "square number")
    path, key = cfg.locate((f"embeddings.{CLIP_TABLE}", f"vision_model.embeddings.{CLIP_TABLE}"))
    values = {"dim": cfg.count("hidden_size", 768), "trained_h": side, "trained_w": side, "interpolation": "bilinear",
              "antialias": True, "max_grid": max(side, DEFAULT_MAX_GRID), "weights": str(path), "key": key}
    notes = (*GRID_NOTES, "every grid is resampled as resize_positional_embeddings does (bilinear with antialias=True, "
                          "half-pixel centres); patches in raster order, the processor's padding patches left out")
    hf = NaflexRecipe(key=key, module="transformers.models.siglip2.modeling_siglip2", embeddings="Siglip2VisionEmbeddings",
                      table=CLIP_TABLE)
    return [Role("vit-learned", "vit-learned", values, (), notes, hf)]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class NaflexRecipe(Recipe):
    """SigLIP-2's vision embeddings class, its table from the checkpoint."""

    kind: ClassVar[str] = "naflex"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"embeddings": EMBEDDINGS, "table": TABLE}

    module: str
    embeddings: str
    key: str
    table: str


class NaflexSession(Session):
    """SigLIP-2's Siglip2VisionEmbeddings.resize_positional_embeddings on the model's trained table (reshaped to its
    square grid, as its forward does), at each image's (grid_h, grid_w) with no padding, added to the patches."""

    def __init__(self, artifact: Artifact, recipe: NaflexRecipe, folder: Path):
        self.embeddings = transformers_attr(recipe.module, recipe.embeddings)(auto_config(folder, recipe)).eval()
        self.table = recipe.table
        table = self.embeddings.get_parameter(self.table)
        table.data = trained(folder, recipe.key).reshape(table.shape)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        side = self.embeddings.position_embedding_size
        with torch.no_grad():
            grid = self.embeddings.get_parameter(self.table).reshape(side, side, -1)
            positions = self.embeddings.resize_positional_embeddings(grid, torch.tensor([[h, w]] * batch), max_length=h * w)
        return (x.reshape(batch, h * w, dim) + positions).reshape(batch, h, w, dim).numpy()


FAMILY = Family(("siglip2_vision_model",), read, "vit-learned (antialiased bilinear at every grid)", sessions={NaflexRecipe: NaflexSession})
