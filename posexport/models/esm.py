"""ESM (`esm`: ESM-1b, ESM-2), whose position_embedding_type says which form it has:
- "rotary" (ESM-2): rope in every layer, θ_i = rope_theta^(−2i/head_dim) over head_dim = hidden_size //
  num_attention_heads, half-split pairs (rotate_half), at position_ids 0 … seq − 1 (EsmModel's arange when
  it is given none). EsmRotaryEmbedding's inv_freq is a persistent buffer loaded from the checkpoint (older
  checkpoints keep one per layer; its load_hook takes the first): a folder with weights has it compared with
  rope_theta's frequencies, and a buffer stored rounded (float16) is an error, since the model rotates with
  the stored values;
- "absolute" (ESM-1b): a learned table (embeddings.position_embeddings) added to the token embeddings at
  position_ids from padding_idx + 1, as RoBERTa's (create_position_ids_from_input_ids); pad_token_id is
  required (the config class has no default, and the model cannot number positions without it).
token_dropout rescales the token embeddings by the share of mask tokens in the sequence: not position code.
An ESMFold config (is_folding_model) is refused: its folding trunk adds relative position bins."""

from __future__ import annotations

import numpy as np

from .. import checkpoint
from ..errors import PosexportError
from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values

FORMS = ("rotary", "absolute")
TABLE_KEYS = ("embeddings.position_embeddings.weight", "esm.embeddings.position_embeddings.weight")
INV_FREQ_KEYS = tuple(f"{prefix}{name}.inv_freq" for name in ("rotary_embeddings", "encoder.layer.0.attention.self.rotary_embeddings")
                      for prefix in ("", "esm."))
# The stored buffer may differ from rope_theta's frequencies by float32 rounding of transformers' own formula.
INV_FREQ_TOLERANCE = 1e-6
TOKEN_DROPOUT = ("token_dropout: the token embeddings are scaled by 0.88 / (1 − the share of mask tokens), mask "
                 "tokens zeroed; not position code, outside this graph")


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.get("is_folding_model", False):
        cfg.fail("is_folding_model", True, "ESMFold's folding trunk adds relative position bins (esmfold_config's "
                 "trunk position_bins) to its pair representation, which posexport does not model")
    cfg.ignore("esmfold_config")  # read by transformers only for a folding model
    if "position_embedding_type" in cfg.data and not cfg.has("position_embedding_type"):
        cfg.fail("position_embedding_type", None, "transformers' ESM then adds no positions at all; say absolute or rotary")
    form = cfg.get("position_embedding_type", "absolute")
    if form not in FORMS:
        cfg.fail("position_embedding_type", form, f"ESM's forms are {' and '.join(FORMS)} (any other adds no positions)")
    notes = (TOKEN_DROPOUT,) if cfg.get("token_dropout", False) else ()
    return rotary(cfg, notes) if form == "rotary" else [absolute(cfg, notes)]


def rotary(cfg: ModelConfig, notes: tuple[str, ...]) -> list[Role]:
    heads = cfg.count("num_attention_heads", 12)
    head_dim = cfg.count("head_dim") if cfg.has("head_dim") else cfg.count("hidden_size", 768) // heads
    theta = cfg.number("rope_theta", 10000.0)
    values = rope_values(cfg, None, head_dim=head_dim, heads=heads, theta=theta,
                         max_positions=cfg.count("max_position_embeddings", 1026))
    stored_inv_freq(cfg, theta, head_dim, INV_FREQ_KEYS)
    why = ("position_ids are 0 … seq − 1 (EsmModel's own when given none, not the padding-offset ids of ESM-1b's table); "
           "the model scales q by head_dim^-0.5 before rotating, which commutes with the rotation")
    return [rope_role(values, cfg, hf_rope("esm.modeling_esm", "EsmRotaryEmbedding"), notes=(why, *notes))]


def stored_inv_freq(cfg: ModelConfig, theta: float, rotary_dim: int, keys: tuple[str, ...]) -> None:
    """The checkpoint's inv_freq buffer (the first of ``keys`` it holds), which the model rotates with, against
    the base's frequencies over rotary_dim channels."""
    if cfg.folder is None or not checkpoint.has_weights(cfg.folder):
        return
    try:
        path, key = cfg.locate(keys)
    except PosexportError:
        return  # no buffer stored: transformers computes it from rope_theta (_init_weights)
    stored = checkpoint.read_tensor(path, key)
    ours = theta ** (-np.arange(0, rotary_dim, 2) / rotary_dim)
    if stored.shape != ours.shape:
        raise PosexportError(f"{path}: {key} has shape {list(stored.shape)}; {rotary_dim} rotary channels turn with {len(ours)}")
    off = float(np.max(np.abs(stored - ours) / ours))
    if off > INV_FREQ_TOLERANCE:
        raise PosexportError(f"{path}: {key} (the rotary frequencies the model loads and rotates with) differs from "
                             f"base {theta:g}'s by {off:.2g} relative (stored rounded?); posexport's rope forms "
                             "them from the base, so it would not be this model's rotation")


def absolute(cfg: ModelConfig, notes: tuple[str, ...]) -> Role:
    if not cfg.has("pad_token_id"):
        raise PosexportError(f"{cfg.source}: the esm config needs key 'pad_token_id': ESM-1b's absolute positions "
                             "start at padding_idx + 1 (create_position_ids_from_input_ids)")
    pad = cfg.number("pad_token_id", integer=True)
    cfg.ignore("rope_theta")  # the rotary form's only
    path, key = cfg.locate(TABLE_KEYS)
    values = {"weights": str(path), "key": key, "max_positions": cfg.count("max_position_embeddings", 1026), "row_offset": 0}
    notes = ("x is the token embeddings [batch, seq, hidden]; the graph adds the trained position row (the embeddings' "
             "LayerNorm, when emb_layer_norm_before, comes after, outside this graph)",
             f"position_ids start at padding_idx + 1 = {pad + 1} (create_position_ids_from_input_ids); rows 0 … {pad} "
             "belong to padding", *notes)
    return Role("learned", "learned", values, (), notes, LearnedRecipe(key=key))


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "ESMFold2: an ESM-C language model (esmc_config, read as its own type esmc) beside an atom encoder whose "
    "rotary turns with each atom's x/y/z coordinates and space UID (EsmFold2RotaryEmbedding: spatial_rope_base_"
    "frequency per axis, uid_rope_base_frequency), not token positions, and an input embedder adding one-hot "
    "relative residue, token and chain offset bins to its pair representation (EsmFold2RelativePositionEncoding); "
    "not modelled": ("esmfold2",),
}


FAMILY = Family(("esm",), read, "rope (position_embedding_type rotary) or learned table (absolute, from padding_idx + 1)", pending=PENDING)
