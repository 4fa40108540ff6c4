"""Swin-V2 and Swin2SR: every block's continuous position bias, a swin window bias whose table
[(2W−1)², heads] is computed from the block's trained `continuous_position_bias_mlp` over log-spaced
offsets (`--table-source mlp`), one graph per block named `swin-s<stage>b<block>`.

As the model builds each block (Swinv2Layer, Swin2SRLayer): its window is min(config.window_size, the
stage's grid side), the grid being image_size // patch_size, halved at every Swin-V2 stage (Swin2SR's
stages keep it); its offsets are divided by the stage's pretrained_window_sizes entry − 1 where that is
set (Swin-V2 only; Swin2SR builds none), else by the window − 1. Their absolute tables
(use_absolute_embeddings) hold num_patches + 1 rows for the patches alone, which the models' own forward
cannot add: refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..contract import Artifact
from ..errors import PosexportError
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family
from .hf_code import auto_config, softmax_input, torch_float, trained
from .plan import Role
from .recipes import Recipe, window_size
from .vit import square

MLP = "attention.self.continuous_position_bias_mlp"
MLP_TENSORS = ("0.weight", "0.bias", "2.weight")
NOTES = ("scores are one block's scaled cosine window scores cos(q, k)·exp(min(logit_scale, ln 100)) per head, "
         "[batch·windows, heads, W², W²]; the bias 16·sigmoid(MLP table) is added after that scaling; the "
         "shifted-window mask is the model's, outside this graph",)


@dataclass(frozen=True)
class Line:
    blocks: str  # one block's module path, of {stage} and {block}
    prefix: str  # the base model's name in a whole checkpoint
    attention: str  # transformers.models.<module>:<class>, the block's self-attention
    halving: bool  # each stage halves the grid (Swin-V2's patch merging); Swin2SR's stages keep it
    pretrained: bool  # the config's pretrained_window_sizes, one per stage (Swin2SR builds every block with 0)
    defaults: tuple[int, int, int, tuple[int, ...], tuple[int, ...]]  # image_size, patch_size, window_size, depths, num_heads


SQUARE = "posexport reads square windows over square grids"
FAMILIES = {
    "swinv2": Line("encoder.layers.{stage}.blocks.{block}", "swinv2", "swinv2.modeling_swinv2:Swinv2SelfAttention",
                     True, True, (224, 4, 7, (2, 2, 6, 2), (3, 6, 12, 24))),
    "swin2sr": Line("encoder.stages.{stage}.layers.{block}", "swin2sr", "swin2sr.modeling_swin2sr:Swin2SRSelfAttention",
                      False, False, (64, 1, 8, (6,) * 6, (6,) * 6)),
}


def mlp_key(cfg: ModelConfig, family: Line, stage: int, block: int) -> tuple[str, str]:
    """(file, name) of the block's MLP, its three tensors in one file of the checkpoint."""
    inner = f"{family.blocks.format(stage=stage, block=block)}.{MLP}"
    path, first = cfg.locate(tuple(f"{name}.{MLP_TENSORS[0]}" for name in (inner, f"{family.prefix}.{inner}")))
    key = first.removesuffix(f".{MLP_TENSORS[0]}")
    if any(cfg.locate((f"{key}.{tensor}",))[0] != path for tensor in MLP_TENSORS[1:]):
        raise PosexportError(f"{cfg.source}: {key}'s tensors lie in two checkpoint files; posexport reads a block's "
                             "MLP from one file")
    return str(path), key


def read(cfg: ModelConfig) -> list[Role]:
    family = FAMILIES[cfg.architecture]
    image, patch, window_size, depths, heads = family.defaults
    grid = square(cfg, "image_size", image, SQUARE) // square(cfg, "patch_size", patch, SQUARE)
    window_size = cfg.count("window_size", window_size)
    depths, heads = cfg.get("depths", list(depths)), cfg.get("num_heads", list(heads))
    if not (isinstance(depths, list) and isinstance(heads, list) and len(depths) == len(heads)):
        cfg.fail("depths", depths, f"needs one entry per stage, like num_heads {heads!r}")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in depths):
        cfg.fail("depths", depths, "expected a block count (an integer ≥ 0) per stage")
    pretrained = cfg.get("pretrained_window_sizes", [0] * len(depths)) if family.pretrained else [0] * len(depths)
    if not (isinstance(pretrained, list) and len(pretrained) == len(depths)):
        cfg.fail("pretrained_window_sizes", pretrained, f"needs one entry per stage, like depths {depths!r}")
    for size in pretrained:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0 or size == 1:
            cfg.fail("pretrained_window_sizes", pretrained, "entries are 0 (the window itself) or a window of at least 2 "
                                                            "(offsets are divided by it − 1)")
    if cfg.get("use_absolute_embeddings", False):
        cfg.fail("use_absolute_embeddings", True, "its table has num_patches + 1 rows for the patches alone, which "
                                                  f"{cfg.architecture}'s own forward cannot add; not read")
    windows = []  # each stage's: min(window_size, its grid side), as the model builds its blocks
    for stage in range(len(depths)):
        resolution = grid // 2**stage if family.halving else grid
        if resolution < 1:
            halved = " (each stage halves the grid)" if stage else ""
            cfg.fail("image_size", cfg.get("image_size"), f"image_size // patch_size = {grid} leaves stage {stage} no patches{halved}")
        windows.append(min(resolution, window_size))
    module, attention = family.attention.split(":")
    roles, layer = [], 0
    for stage, (count, stage_heads, window) in enumerate(zip(depths, heads, windows)):
        for block in range(count):
            path, key = mlp_key(cfg, family, stage, block)
            values = {"window_h": window, "window_w": window, "heads": stage_heads, "table_source": "mlp",
                      "pretrained_window": pretrained[stage], "weights": path, "key": key}
            hf = ContinuousBiasRecipe(key=key, window=window, pretrained_window=pretrained[stage],
                                      module=f"transformers.models.{module}", attention=attention)
            roles.append(Role(f"swin-s{stage}b{block}", "swin", values, (layer,), NOTES, hf))
            layer += 1
    return roles


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class ContinuousBiasRecipe(Recipe):
    """The model's self-attention class at the block's window and pretrained window, its continuous-position-bias
    MLP from the checkpoint (under ``key``)."""

    kind: ClassVar[str] = "swin-continuous"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"attention": re.compile(r"(Swinv2|Swin2SR)SelfAttention")}
    described: ClassVar[Mapping[str, str]] = {"window": "a window size", "pretrained_window": "a window size"}

    module: str
    attention: str
    key: str
    window: int
    pretrained_window: int

    def check(self) -> None:
        window_size(self.window, "window")
        window_size(self.pretrained_window, "pretrained_window")


class ContinuousBiasSession(Session):
    """Swin-V2's continuous position bias: the model's own self-attention class (Swinv2SelfAttention,
    Swin2SRSelfAttention) built at the block's window and pretrained window, its continuous_position_bias_mlp
    holding the checkpoint's tensors; the bias it adds after its scaled cosine scores (16·sigmoid of the MLP's
    table over its own relative_coords_table, gathered) captured at its softmax, see softmax_input."""

    def __init__(self, artifact: Artifact, recipe: ContinuousBiasRecipe, folder: Path):
        heads, window, pretrained = artifact.params.heads, recipe.window, recipe.pretrained_window
        attention_class = transformers_attr(recipe.module, recipe.attention)
        attention = attention_class(auto_config(folder, recipe), heads, heads, window, (pretrained, pretrained)).eval()
        attention.continuous_position_bias_mlp.load_state_dict(
            {name: trained(folder, f"{recipe.key}.{name}") for name in ("0.weight", "0.bias", "2.weight")})
        self.bias = softmax_input(attention, heads, window)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return (torch_float(feeds["scores"]) + self.bias).numpy()


FAMILY = Family(tuple(FAMILIES), read, "swin bias (its table from the block's continuous-position-bias MLP)", sessions={ContinuousBiasRecipe: ContinuousBiasSession})
