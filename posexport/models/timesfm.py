"""TimesFM (`timesfm`) with use_positional_embedding: TimesFmPositionalEmbedding's sinusoid,
ω_i = min_timescale · (max_timescale / min_timescale)^(−i/(d/2 − 1)), i < d/2, laid out [sin | cos], is added to
the input layer's output per patch. With min_timescale = 1 that is fairseq's rule (Whisper's encoder, whisper.py):
posexport's sinusoidal encoding, `--pair-layout concat`, base max_timescale^((d/2)/(d/2 − 1)). The model rolls
each series' rows so that its first patch that is not all padding sits at row 0: position_ids[b, j] =
(j − k_b) mod patches, k_b that patch's index (−1 when every patch is padding), the leading padded patches taking
the last rows. The frequency embedding (freq_emb) added after is an input's, not a position's. Without
use_positional_embedding (transformers' default) the model adds no position code: nothing to build."""

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
from .hf_code import auto_config
from .plan import Role
from .recipes import Recipe


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.get("use_positional_embedding", False) is not True:
        cfg.fail("use_positional_embedding", cfg.get("use_positional_embedding", False),
                 "TimesFM then adds no position code (its causal attention alone orders the patches); nothing to build")
    d = cfg.count("hidden_size", 1280)
    half = d // 2
    if d % 2 or half < 2:
        cfg.fail("hidden_size", d, "the model zero-pads an odd width's last channel; posexport's sinusoid needs an even "
                                   "hidden_size ≥ 4")
    if cfg.number("min_timescale", 1) != 1:
        cfg.fail("min_timescale", cfg.get("min_timescale"), "scales every frequency (ω_0 = min_timescale); posexport's "
                                                             "sinusoid has ω_0 = 1, so only 1 is read")
    largest = cfg.number("max_timescale", 10000)
    if largest <= 1:
        cfg.fail("max_timescale", largest, "expected a number > 1 (min_timescale)")
    notes = ("x is the input layer's output on each [normalised patch | its padding] [batch, patches, hidden]; "
             "position_ids[b, j] = (j − k_b) mod patches, k_b the first patch of series b that is not all padding "
             "(−1 when all are)",
             f"base = max_timescale^((d/2)/(d/2 − 1)) = {largest}^({half}/{half - 1}) is its timescale rule in posexport's "
             "terms; the frequency embedding added after is an input, not a position")
    return [Role("sinusoidal", "sinusoidal", {"d_model": d, "base": float(largest) ** (half / (half - 1)), "pair_layout": "concat"},
                 (), notes, SinusoidModuleRecipe(module="transformers.models.timesfm.modeling_timesfm",
                                      positional="TimesFmPositionalEmbedding"))]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class SinusoidModuleRecipe(Recipe):
    """The model's own sinusoid module, built from its config."""

    kind: ClassVar[str] = "sinusoid-module"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"positional": re.compile(r"[A-Za-z0-9_]+PositionalEmbedding")}

    module: str
    positional: str


class SinusoidModuleSession(Session):
    """x + the model's own sinusoid module, built from the folder's config, called on position_ids (TimesFM's
    TimesFmPositionalEmbedding: its rows at any [batch, seq] positions)."""

    def __init__(self, artifact: Artifact, recipe: SinusoidModuleRecipe, folder: Path):
        self.module = transformers_attr(recipe.module, recipe.positional)(auto_config(folder, recipe)).eval()

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        positions = torch.from_numpy(np.asarray(feeds["position_ids"], dtype=np.float32))
        with torch.no_grad():
            return np.asarray(feeds["x"], dtype=np.float32) + self.module(position=positions).numpy()


FAMILY = Family(("timesfm",), read, "sinusoidal ([sin | cos], use_positional_embedding only; rows rolled past leading padding)", sessions={SinusoidModuleRecipe: SinusoidModuleSession})
