"""Pix2Struct and Kosmos-2.5's vision towers, and Pix2Struct's text decoder.
- The towers (Pix2StructVisionEmbeddings, Kosmos2_5VisionEmbeddings) take each patch's row and column ids from
  the first two columns of flattened_patches and add row_embedder(row ids) + column_embedder(column ids) to the
  patch projection of the rest: two learned tables, `row-learned` and `column-learned`, each gathered at its own
  ids. The image processors write 1-based ids (1 … rows, 1 … columns) and 0 on padding patches, so row 0 of each
  table is padding's; the tables have seq_len (Kosmos-2.5: max_num_patches) rows.
- The text decoder (Pix2StructTextModel) is T5's decoder stack: a causal bucketed bias (compute_bias always passes
  bidirectional=False), trained in layer 0 alone and handed to every layer (cross-attention has none).
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
from .recipes import EMBEDDINGS, Recipe, RecipeError, T5Recipe
from .t5 import NOTES as T5_NOTES


@dataclass(frozen=True)
class Tower:
    module: str  # transformers module of its embeddings class
    embeddings: str  # the class adding the two tables
    rows: tuple[str, int]  # the config key giving the tables' rows, and the config class's default
    bases: tuple[str, ...]  # the tower's module in a whole model's checkpoint
    unused: tuple[str, ...] = ()  # position keys of its config that its code never reads


AXES = ("row", "column")  # flattened_patches' columns 0 and 1, in that order
TOWERS = {
    # Pix2StructVisionConfig carries T5's bucket keys, but Pix2StructVisionAttention adds no bias
    "pix2struct_vision_model": Tower("pix2struct.modeling_pix2struct", "Pix2StructVisionEmbeddings", ("seq_len", 4096),
                                     ("encoder",), ("relative_attention_num_buckets", "relative_attention_max_distance")),
    "kosmos_2_5_vision_model": Tower("kosmos2_5.modeling_kosmos2_5", "Kosmos2_5VisionEmbeddings",
                                     ("max_num_patches", 4096), ("vision_model",)),
}
TEXT_TABLE = "layer.0.self_attention.attention.relative_attention_bias.weight"
TEXT_BASES = ("decoder",)  # Pix2StructForConditionalGeneration's text decoder
FAMILIES = (*TOWERS, "pix2struct_text_model")
# model_type -> what it builds (docs/models.md)
ENCODINGS = {**dict.fromkeys(TOWERS, "learned tables: a row and a column table, each at the patch's 1-based id "
                                     "(0: padding)"),
             "pix2struct_text_model": "t5 bias (causal; layer 0's table, added in every layer)"}


def read(cfg: ModelConfig) -> list[Role]:
    return text_decoder(cfg) if cfg.architecture == "pix2struct_text_model" else tower(cfg)


def tower(cfg: ModelConfig) -> list[Role]:
    line = TOWERS[cfg.architecture]
    cfg.ignore(*line.unused)
    rows = cfg.count(*line.rows)
    roles = []
    for index, axis in enumerate(AXES):
        table = f"embeddings.{axis}_embedder.weight"
        path, key = cfg.locate((table, *(f"{base}.{table}" for base in line.bases)))
        notes = (f"x is the patch projection [batch, seq, hidden] (patch_projection of flattened_patches[:, :, 2:]); "
                 f"the {AXES[1 - index]} table's rows are added beside it (the other role)",
                 f"position_ids are flattened_patches[:, :, {index}] as integers, each patch's 1-based {axis} "
                 f"(1 … {axis}s) as the image processor writes it, 0 on padding patches (the table's row 0 is padding's)",
                 f"the table has {rows} rows ({line.rows[0]}): ids up to {rows - 1}; the image processor's ids reach "
                 f"max_patches at most (a one-patch-wide image), so max_patches ≤ {rows - 1} keeps them in the table")
        hf = PatchCoordinatesRecipe(key=key, module=f"transformers.models.{line.module}",
                                    embeddings=line.embeddings, axis=axis)
        roles.append(Role(f"{axis}-learned", "learned", {"weights": str(path), "key": key, "max_positions": rows}, (),
                          notes, hf))
    return roles


def text_decoder(cfg: ModelConfig) -> list[Role]:
    layers = cfg.count("num_layers", 12)
    values = {"heads": cfg.count("num_heads", 12),
              "num_buckets": cfg.count("relative_attention_num_buckets", 32),
              "max_distance": cfg.count("relative_attention_max_distance", 128),
              "bidirectional": False}
    path, key = cfg.locate((TEXT_TABLE, *(f"{base}.{TEXT_TABLE}" for base in TEXT_BASES)))
    notes = (*T5_NOTES, "causal (Pix2StructTextAttention.compute_bias buckets with bidirectional=False whatever "
                        "is_decoder says); layer 0's table, its bias handed to every layer")
    hf = T5Recipe(key=key, decoder=True, module="transformers.models.pix2struct.modeling_pix2struct",
                  attention="Pix2StructTextAttention")
    return [Role("t5-decoder", "t5", {**values, "weights": str(path), "key": key}, tuple(range(layers)), notes, hf)]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class PatchCoordinatesRecipe(Recipe):
    """A Pix2Struct-style tower's embeddings class, its table of one axis (row or column) from the checkpoint."""

    kind: ClassVar[str] = "patch-coordinates"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"embeddings": EMBEDDINGS}

    module: str
    embeddings: str
    key: str
    axis: str

    def check(self) -> None:
        if self.axis not in PATCH_AXES:
            raise RecipeError(f"recipe axis {self.axis!r} is not one of {', '.join(PATCH_AXES)}")


# A Pix2Struct-style tower's id columns: flattened_patches[:, :, 0] is each patch's row, [:, :, 1] its column.
PATCH_AXES = ("row", "column")


class PatchCoordinatesSession(Session):
    """Pix2Struct's (Kosmos-2.5's) vision embeddings forward on the model's trained row and column tables:
    flattened_patches of [row ids, column ids | x], the role's position_ids in its axis's column; its patch
    projection the identity (x is the projection's output) and the other axis's table zeroed (its rows are the
    other role's)."""

    def __init__(self, artifact: Artifact, recipe: PatchCoordinatesRecipe, folder: Path):
        import torch

        self.embeddings = transformers_attr(recipe.module, recipe.embeddings)(auto_config(folder, recipe)).eval()
        holder = recipe.key.rsplit(".", 2)[0]  # the embeddings module: both tables by the class's own names
        for axis in PATCH_AXES:
            table = getattr(self.embeddings, f"{axis}_embedder").weight
            table.data = trained(folder, f"{holder}.{axis}_embedder.weight") if axis == recipe.axis \
                else torch.zeros_like(table)
        self.embeddings.patch_projection = torch.nn.Identity()
        self.column = PATCH_AXES.index(recipe.axis)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        ids = torch.zeros(*x.shape[:-1], 2)
        ids[..., self.column] = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"])).float()
        with torch.no_grad():
            return self.embeddings(torch.cat([ids, x], dim=-1)).numpy()


FAMILY = Family(FAMILIES, read, ENCODINGS, sessions={PatchCoordinatesRecipe: PatchCoordinatesSession})
