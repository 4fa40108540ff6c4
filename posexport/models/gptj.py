"""GPT-J (`gptj`) and CodeGen (`codegen`): rope on the first `rotary_dim` channels of each head (default
64), interleaved pairs (2i, 2i + 1) (rotate_every_two), base 10000, head_dim = n_embd // n_head. Their
attention takes sin/cos rows of `create_sinusoidal_positions` at position_ids; the `hf` runtime runs
those two functions of the model's module."""

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
from .hf_code import from_bshd, to_bshd
from .plan import Role
from .recipes import APPLY, CREATE, Recipe
from .rope_family import CONTRACT
from .rope_reading import rope_values

THETA = 10000.0  # create_sinusoidal_positions' fixed base


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.number("n_head", 16, integer=True)
    cfg.ignore("n_ctx")  # CodeGen's context, the same number as n_positions; rope does not read it
    head_dim = cfg.number("n_embd", 4096, integer=True) // heads
    rotary = cfg.number("rotary_dim", 64, integer=True)
    if not 2 <= rotary <= head_dim or rotary % 2:
        cfg.fail("rotary_dim", rotary, f"expected an even number of channels in [2, head_dim = {head_dim}]")
    values = rope_values(cfg, None, head_dim=head_dim, heads=heads, theta=THETA, pair_layout="interleaved",
                         max_positions=cfg.number("n_positions", 2048, integer=True), partial=rotary / head_dim)
    values["rotary_dim"] = rotary
    module = {"gptj": "gptj", "codegen": "codegen"}[cfg.architecture]
    hf = GptjRecipe(module=f"transformers.models.{module}.modeling_{module}", create="create_sinusoidal_positions",
                    apply="apply_rotary_pos_emb")
    note = f"pairs (2i, 2i+1) of the first {rotary} of {head_dim} channels rotate; the rest pass through"
    layers = tuple(range(cfg.number("n_layer", 0, integer=True)))
    return [Role("rope", "rope", values, layers, (CONTRACT, note), hf)]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class GptjRecipe(Recipe):
    """GPT-J's (CodeGen's) create_sinusoidal_positions and apply_rotary_pos_emb."""

    kind: ClassVar[str] = "gptj"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"create": CREATE, "apply": APPLY}

    module: str
    create: str
    apply: str


class GptjSession(Session):
    """GPT-J's (CodeGen's) own create_sinusoidal_positions rows at position_ids and its apply_rotary_pos_emb
    on the first rotary_dim channels of x [batch, seq, heads, dim], as its attention does."""

    def __init__(self, artifact: Artifact, recipe: GptjRecipe, folder: Path):
        self.create, self.apply = transformers_attr(recipe.module, recipe.create), transformers_attr(recipe.module, recipe.apply)
        self.p = artifact.params

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        p, bshd = self.p, to_bshd(feeds["x"], self.p)
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            sincos = self.create(int(positions.max()) + 1, p.rotary_dim)[positions]
            sin, cos = torch.split(sincos, p.rotary_dim // 2, dim=-1)
            out = torch.cat([self.apply(bshd[..., : p.rotary_dim], sin, cos), bshd[..., p.rotary_dim :]], dim=-1)
        return from_bshd(out, p)


FAMILY = Family(("gptj", "codegen"), read, "rope (partial, interleaved pairs)", sessions={GptjRecipe: GptjSession})
