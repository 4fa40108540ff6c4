"""BEiT: a relative-position bias over the whole patch grid (W × W = image_size // patch_size) plus the
class token, whose table ends with three rows (class→token, token→class, class→class): posexport's swin
bias with `--class-token true`. Either one table shared by every layer (`use_shared_relative_position_bias`,
role `beit-bias`) or one per layer (`use_relative_position_bias`, roles `beit-bias-<i>`), read from the
checkpoint in transformers 5's names or the published ones. BEiT's absolute position table
(`use_absolute_position_embeddings`) is a vit-learned role `beit-absolute`. Data2Vec-Vision is BEiT's code
copied: read the same way, checked against its own copy."""

from __future__ import annotations

import inspect
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
from .recipes import Recipe
from .vit import grid_role

TABLE = "relative_position_bias.relative_position_bias_table"
NOTES = ("scores are one layer's scaled q·kᵀ/√d over [class token | patches], [batch, heads, 1 + W², 1 + W²]",)


ABSOLUTE = ("embeddings.position_embeddings", "beit.embeddings.position_embeddings")
ABSOLUTE_NOTES = ("x is the patch embeddings as a grid [batch, grid_h, grid_w, hidden]; cls is the class token "
                  "[batch, 1, hidden]; y is [batch, 1 + grid_h·grid_w, hidden] as BeitEmbeddings returns it (before dropout)",)


# model_type -> (transformers module, class prefix, the base model's name in a whole checkpoint)
FAMILIES = {"beit": ("beit.modeling_beit", "Beit", "beit"),
            "data2vec-vision": ("data2vec.modeling_data2vec_vision", "Data2VecVision", "data2vec_vision")}


def table_keys(layer: int | None, base: str = "beit") -> tuple[str, ...]:
    if layer is None:
        names = (f"shared_position_bias.{TABLE}", f"encoder.{TABLE}")
    else:
        names = (f"layers.{layer}.{TABLE}", f"encoder.layer.{layer}.attention.attention.{TABLE}")
    return (*names, *(f"{base}.{n}" for n in names))


def read(cfg: ModelConfig) -> list[Role]:
    module, prefix, base = FAMILIES[cfg.architecture]
    absolute = bool(cfg.get("use_absolute_position_embeddings", False))
    shared = bool(cfg.get("use_shared_relative_position_bias", False))
    per_layer = bool(cfg.get("use_relative_position_bias", False))
    if shared and per_layer:
        cfg.fail("use_shared_relative_position_bias", shared, "posexport reads BEiT with exactly one of "
                 "use_shared_relative_position_bias and use_relative_position_bias")
    side = cfg.number("image_size", 224, integer=True) // cfg.number("patch_size", 16, integer=True)
    count = cfg.number("num_hidden_layers", 12, integer=True)
    common = {"window_h": side, "window_w": side, "heads": cfg.number("num_attention_heads", 12, integer=True),
              "class_token": True}
    absolute_keys = tuple(k.replace("beit.", f"{base}.") for k in ABSOLUTE)
    roles = [grid_role(cfg, module, f"{prefix}Embeddings", 1, absolute_keys, cfg.number("hidden_size", 768, integer=True),
                       ABSOLUTE_NOTES, "beit-absolute")] if absolute else []
    for layer in (None,) if shared else range(count) if per_layer else ():
        path, key = cfg.locate(table_keys(layer, base))
        name, layers = ("beit-bias", tuple(range(count))) if layer is None else (f"beit-bias-{layer}", (layer,))
        roles.append(Role(name, "swin", {**common, "weights": str(path), "key": key}, layers, NOTES,
                          BeitRecipe(key=key, module=f"transformers.models.{module}",
                                     bias=f"{prefix}RelativePositionBias")))
    return roles


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class BeitRecipe(Recipe):
    """BeitRelativePositionBias (or the model's copy of it) holding the checkpoint's table ``key``."""

    kind: ClassVar[str] = "beit"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"bias": re.compile(r"[A-Za-z0-9_]+RelativePositionBias")}

    module: str
    bias: str
    key: str


class BeitSession(Session):
    """BeitRelativePositionBias (or the model's copy of it, as the recipe names) holding the layer's (or the
    shared) trained table, at the trained grid."""

    def __init__(self, artifact: Artifact, recipe: BeitRecipe, folder: Path):
        bias = transformers_attr(recipe.module,
                           recipe.bias)
        # Data2Vec-Vision's copy takes its window as an argument; BEiT's reads it from the config.
        window = {"window_size": (artifact.params.window_h, artifact.params.window_w)} \
            if "window_size" in inspect.signature(bias).parameters else {}
        self.bias = bias(auto_config(folder, recipe), **window).eval()
        self.bias.relative_position_bias_table.data = trained(folder, recipe.key)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        with torch.no_grad():
            return (torch_float(feeds["scores"]) + self.bias(self.bias.window_size)).numpy()


FAMILY = Family(tuple(FAMILIES), read, "swin bias (class token)", sessions={BeitRecipe: BeitSession})
