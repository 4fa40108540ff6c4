"""CLVP (Tortoise-TTS's contrastive model): `clvp_encoder` (its text and speech encoders), `clvp_decoder` (the
speech decoder) and `clvp`, the whole model holding the three and a conditioning encoder.

- An encoder (use_rotary_embedding) rotates the first rotary_dim = max(projection_dim // (2 · num_attention_heads),
  32) channels of each head, θ_i = 10000^(−2i/rotary_dim), half-split within them (rotate_half), at
  position_ids 0 … seq − 1 (ClvpRotaryPositionalEmbedding, cos/sin indexed at the attention's position_ids by
  apply_rotary_pos_emb), and the values with the queries and keys (the same rope on a third tensor); the other
  head_dim − rotary_dim channels pass. Its inv_freq is a persistent buffer loaded from the checkpoint: a folder
  with weights has it compared with the base's frequencies, as ESM's (esm.py).
- The decoder adds a learned table (position_embeds_layer, max_position_embeddings rows) at position_ids past
  length + token index, from 0.
- The whole model's conditioning encoder adds a second table to the text tokens (text_position_embedding,
  decoder_config.max_text_tokens rows) at cumsum(attention_mask) − 1 over the text with its added bos and eos
  tokens; its mel attention blocks use no positions."""

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
from .esm import stored_inv_freq
from .family import Family
from .hf_code import auto_config, torch_float
from .plan import Role
from .recipes import APPLY, ROTARY, LearnedRecipe, Recipe
from .rope_family import rope_role
from .rope_reading import rope_values

THETA = 10000.0  # ClvpRotaryPositionalEmbedding's fixed base
MAX_POSITIONS = 4096  # the encoders' angles are formed per length, without a limit: posexport's default
MODULE = "clvp.modeling_clvp"
# What each type builds (posexport list --models).
ENCODINGS = {"clvp_encoder": "rope (partial, on values too)", "clvp_decoder": "learned table",
             "clvp": "rope (partial, on values too) in each encoder; learned tables in its decoder and conditioning encoder"}
TABLE_CONTRACT = "x is the token embeddings [batch, seq, hidden]; the graph adds the trained position row"


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture == "clvp_encoder":
        return [encoder(cfg, "rope", ("rotary_pos_emb.inv_freq",))]
    if cfg.architecture == "clvp_decoder":
        return [decoder(cfg, "learned", ("position_embeds_layer.weight", "decoder.position_embeds_layer.weight",
                                         "model.decoder.position_embeds_layer.weight"))]
    text, speech, dec = (part(cfg, name) for name in ("text_config", "speech_config", "decoder_config"))
    cfg.ignore("projection_dim")  # the joint embedding's width; each encoder's rotary reads its own
    roles = [encoder(text, "rope-text", ("text_encoder_model.rotary_pos_emb.inv_freq",), "text_config"),
             encoder(speech, "rope-speech", ("speech_encoder_model.rotary_pos_emb.inv_freq",), "speech_config"),
             decoder(dec, "learned-decoder", ("speech_decoder_model.model.decoder.position_embeds_layer.weight",))]
    path, key = cfg.locate(("conditioning_encoder.text_position_embedding.weight",))
    values = {"weights": str(path), "key": key, "max_positions": dec.count("max_text_tokens", 404), "row_offset": 0}
    notes = (TABLE_CONTRACT.replace("token embeddings", "conditioning encoder's text token embeddings"),
             "position_ids are cumsum(attention_mask) − 1 over the text with the bos and eos tokens the encoder adds "
             "(0 … text length + 1 without padding)")
    for sub in (text, speech, dec):
        sub.check_all_read()
    return [*roles, Role("learned-conditioning", "learned", values, (), notes, LearnedRecipe(key=key))]


def part(cfg: ModelConfig, name: str) -> ModelConfig:
    data = cfg.get(name, {})
    if not isinstance(data, dict):
        cfg.fail(name, data, "expected an object")
    return ModelConfig(data, cfg.architecture, f"{cfg.source} {name}", cfg.folder)


def encoder(cfg: ModelConfig, role: str, inv_freq_keys: tuple[str, ...], part: str = "") -> Role:
    if not cfg.get("use_rotary_embedding", True):
        cfg.fail("use_rotary_embedding", False, "the encoder then has no position encoding at all; nothing to build")
    heads = cfg.count("num_attention_heads", 12)
    head_dim = cfg.count("hidden_size", 768) // heads
    rotary_dim = max(cfg.count("projection_dim", 768) // (2 * heads), 32)
    if rotary_dim % 2 or rotary_dim > head_dim:
        raise PosexportError(f"{cfg.source}: CLVP's rotary width max(projection_dim // (2 · num_attention_heads), 32) = "
                             f"{rotary_dim} is {'odd' if rotary_dim % 2 else f'wider than head_dim {head_dim}'}: "
                             "transformers' encoder does not rotate it as rope")
    values = {**rope_values(cfg, None, head_dim=head_dim, heads=heads, theta=THETA, max_positions=MAX_POSITIONS),
              "rotary_dim": rotary_dim}
    stored_inv_freq(cfg, THETA, rotary_dim, inv_freq_keys)
    note = (f"the first {rotary_dim} of {head_dim} channels of the queries, keys and values rotate (half-split within "
            "them); position_ids are 0 … seq − 1 (the encoder's own)")
    recipe = ClvpRopeRecipe(module=f"transformers.models.{MODULE}", rotary="ClvpRotaryPositionalEmbedding",
                            apply="apply_rotary_pos_emb", part=part)
    return rope_role(values, cfg, recipe, role, notes=(note,))


def decoder(cfg: ModelConfig, role: str, keys: tuple[str, ...]) -> Role:
    path, key = cfg.locate(keys)
    values = {"weights": str(path), "key": key, "max_positions": cfg.count("max_position_embeddings", 608), "row_offset": 0}
    notes = (TABLE_CONTRACT, "position_ids are 0-based (the decoder's own: past length + token index)")
    return Role(role, "learned", values, (), notes, LearnedRecipe(key=key))


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class ClvpRopeRecipe(Recipe):
    """ClvpRotaryPositionalEmbedding and its apply function (on a composite's encoder part)."""

    kind: ClassVar[str] = "clvp-rope"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"rotary": ROTARY, "apply": APPLY}

    module: str
    rotary: str
    apply: str


class ClvpRopeSession(Session):
    """CLVP's encoder rotary: ClvpRotaryPositionalEmbedding's angles for positions 0 … the largest, whose cos/sin
    its apply_rotary_pos_emb indexes at position_ids, on the head's first rotary channels (its attention's split)."""

    def __init__(self, artifact: Artifact, recipe: ClvpRopeRecipe, folder: Path):
        self.rotary = transformers_attr(recipe.module, recipe.rotary)(auto_config(folder, recipe)).eval()
        self.apply = transformers_attr(recipe.module, recipe.apply)
        self.bshd = artifact.params.layout == "bshd"

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        q = x.transpose(1, 2) if self.bshd else x  # transformers' [batch, heads, seq, dim]
        positions = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))
        with torch.no_grad():
            angles = self.rotary(torch.zeros(1, int(positions.max()) + 1))
            cos, sin = angles.cos().squeeze(0), angles.sin().squeeze(0)
            rotated = q[..., : cos.shape[-1]]
            out = torch.cat([self.apply(rotated, rotated, rotated, cos, sin, positions)[0], q[..., cos.shape[-1] :]], dim=-1)
        return (out.transpose(1, 2) if self.bshd else out).numpy()


FAMILY = Family(("clvp", "clvp_encoder", "clvp_decoder"), read, ENCODINGS, sessions={ClvpRopeRecipe: ClvpRopeSession})
