"""Swin: every block has its own trained relative-position bias table [(2W−1)², heads] over a W × W
window (config.window_size), added to the scaled window scores; one graph per block, named
`swin-s<stage>b<block>`, its table read from the checkpoint (transformers 5's
`…attention.relative_position_bias.relative_position_bias_table`, or the published
`…attention.self.relative_position_bias_table`, with or without the `swin.` prefix). Swin's absolute
table (`use_absolute_embeddings`, patches only, no class token) is a vit-learned role `swin-absolute`,
resampled as SwinEmbeddings does.

Swin's copies whose self-attention adds the same bias inline, with no SwinRelativePositionBias module
(Donut-Swin, MaskFormer-Swin, CLAP's HTS-AT audio tower `clap_audio_model`), are read by one line each in
FAMILIES: the config key naming heads per stage, the tables' paths, and the self-attention class the hf
runtime runs; their absolute tables (use_absolute_embeddings) are not read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family
from .hf_code import auto_config, softmax_input, torch_float, trained
from .plan import Role
from .recipes import Recipe, window_size
from .vit import grid_role

SPELLINGS = ("attention.relative_position_bias.relative_position_bias_table", "attention.self.relative_position_bias_table")
NOTES = ("scores are one block's scaled window scores q·kᵀ/√d, [batch·windows, heads, W², W²]; the shifted-window "
         "mask is the model's, outside this graph",)


ABSOLUTE_NOTES = ("x is the normalised patch embeddings as a grid [batch, grid_h, grid_w, embed_dim]; y likewise, "
                  "positions added (SwinEmbeddings before dropout; no class token)",)


@dataclass(frozen=True)
class Line:
    encoder: str = "encoder"  # the stages' module path: <encoder>.layers.<stage>.blocks.<block>
    prefixes: tuple[str, ...] = ("swin",)  # the base model's name in a whole checkpoint
    heads: str = "num_heads"  # the config key giving each stage's heads
    defaults: tuple[int, tuple[int, ...]] = (7, (3, 6, 12, 24))  # the config class's window_size and heads
    attention: str = ""  # transformers.models.<module>:<class> computing the bias inline ("": Swin's own module)


FAMILIES = {
    "swin": Line(),
    "donut-swin": Line(prefixes=("donut",), attention="donut.modeling_donut_swin:DonutSwinSelfAttention"),
    "maskformer-swin": Line(prefixes=("model",), attention="maskformer.modeling_maskformer_swin:MaskFormerSwinSelfAttention"),
    "clap_audio_model": Line("audio_encoder", ("audio_model",), "num_attention_heads", (8, (4, 8, 16, 32)),
                               "clap.modeling_clap:ClapAudioSelfAttention"),
}


def table_keys(stage: int, block: int, family: Line = FAMILIES["swin"]) -> tuple[str, ...]:
    inner = [f"{family.encoder}.layers.{stage}.blocks.{block}.{s}" for s in SPELLINGS]
    return (*inner, *(f"{prefix}.{k}" for prefix in family.prefixes for k in inner))


def read(cfg: ModelConfig) -> list[Role]:
    family = FAMILIES[cfg.architecture]
    window = cfg.number("window_size", family.defaults[0], integer=True)
    depths, heads = cfg.get("depths", [2, 2, 6, 2]), cfg.get(family.heads, list(family.defaults[1]))
    if not (isinstance(depths, list) and isinstance(heads, list) and len(depths) == len(heads)):
        cfg.fail("depths", depths, f"needs one entry per stage, like {family.heads} {heads!r}")
    roles, layer = [], 0
    if family.attention and cfg.get("use_absolute_embeddings", False):
        cfg.fail("use_absolute_embeddings", True, f"{cfg.architecture}'s absolute table is not read (only Swin's)")
    if cfg.get("use_absolute_embeddings", False):
        keys = ("embeddings.position_embeddings", "swin.embeddings.position_embeddings")
        roles.append(grid_role(cfg, "swin.modeling_swin", "SwinEmbeddings", 0, keys, cfg.number("embed_dim", 96, integer=True),
                               ABSOLUTE_NOTES, "swin-absolute"))
    for stage, (count, stage_heads) in enumerate(zip(depths, heads)):
        for block in range(count):
            path, key = cfg.locate(table_keys(stage, block, family))
            values = {"window_h": window, "window_w": window, "heads": stage_heads, "weights": str(path), "key": key}
            module, attention = family.attention.split(":") if family.attention else ("swin.modeling_swin", "")
            hf = SwinRecipe(key=key, window=window, module=f"transformers.models.{module}", attention=attention)
            roles.append(Role(f"swin-s{stage}b{block}", "swin", values, (layer,), NOTES, hf))
            layer += 1
    return roles


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class SwinRecipe(Recipe):
    """SwinRelativePositionBias at the block's window, or a Swin copy's own self-attention (``attention``), holding
    the checkpoint's table ``key``."""

    kind: ClassVar[str] = "swin"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"attention": re.compile(r"(DonutSwin|MaskFormerSwin|ClapAudio)SelfAttention")}
    described: ClassVar[Mapping[str, str]] = {"window": "a window size"}

    module: str
    key: str
    window: int
    attention: str = ""

    def check(self) -> None:
        window_size(self.window, "window")


class SwinSession(Session):
    """SwinRelativePositionBias (its own index buffer) holding the block's trained table, added to scores; or,
    for a Swin copy that adds the bias inline (recipe attention: Donut-Swin's, CLAP's), that self-attention
    itself, see inline_bias."""

    def __init__(self, artifact: Artifact, recipe: SwinRecipe, folder: Path):
        import torch

        window, heads = recipe.window, artifact.params.heads
        if recipe.attention:
            self.bias = inline_bias(transformers_attr(recipe.module, recipe.attention), auto_config(folder, recipe),
                                    heads, window, trained(folder, recipe.key))
            return
        swin_bias = transformers_attr("transformers.models.swin.modeling_swin", "SwinRelativePositionBias")
        module = swin_bias(heads, (window, window)).eval()
        module.relative_position_bias_table.data = trained(folder, recipe.key)
        with torch.no_grad():
            self.bias = module()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return (torch_float(feeds["scores"]) + self.bias).numpy()


def inline_bias(attention_class: Any, config: Any, heads: int, window: int, table: Any) -> Any:
    """The window bias a Swin copy's self-attention adds inline: the class built for the block (head size 1)
    holding the trained table, see softmax_input."""
    attention = attention_class(config, heads, heads, window).eval()
    attention.relative_position_bias_table.data = table
    return softmax_input(attention, heads, window)


FAMILY = Family(tuple(FAMILIES), read, "swin bias", sessions={SwinRecipe: SwinSession})
