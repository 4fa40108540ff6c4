"""Fixed sinusoid tables added to the token embeddings, all laid out [sin | cos] (posexport's sinusoidal
encoding, `--pair-layout concat`), in one of two frequency rules:
- Vaswani's, ω_i = 10000^(−2i/d): Marian's and Pegasus' <X>SinusoidalPositionalEmbedding, CTRL's
  positional_encoding; base 10000;
- fairseq's (tensor2tensor's), ω_i = exp(−i · ln(10000) / (d/2 − 1)): M2M-100, NLLB-MoE, FSMT, XGLM,
  Speech2Text, Kosmos-2's and Kosmos-2.5's text models, TIPSv2's text tower (get_embedding), PEGASUS-X, and FunASR-Nano's
  encoder (over num_mel_bins × num_stacked_frames channels of its input features, rows from 1); base
  10000^((d/2)/(d/2 − 1)), since b^(−2i/d) = 10000^(−i/(d/2 − 1)) (Whisper's encoder rule, whisper.py).
Positions start at 0 (FunASR: 1), or (fairseq's make_positions / create_position_ids_from_input_ids) at
padding_idx + 1 = pad_token_id + 1: rows 0 … padding_idx are never added to a token. Encoder-decoders add
the same table to both parts. The graph covers any position, past the model's rows too. Parity's hf runtime
builds the table with Whisper's `sinusoids` (fairseq's rule) or VideoPrism's create_sinusoidal_positions
(Vaswani's); tests/models/test_sinusoids.py checks each type against its own module."""

from __future__ import annotations

import math
from typing import NamedTuple

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import SinusoidTableRecipe, WhisperSinusoidRecipe

FROM_ZERO, FROM_ONE, FROM_PADDING = "0", "1", "padding_idx + 1"
VASWANI = SinusoidTableRecipe(module="transformers.models.videoprism.modeling_videoprism", create="create_sinusoidal_positions")
FAIRSEQ = WhisperSinusoidRecipe()


class Table(NamedTuple):
    defaults: dict[str, int]  # the channels' key(s) first, then the keys sizing the table(s): the config class's defaults
    fairseq: bool  # fairseq's frequency rule (d/2 − 1), else Vaswani's
    start: str  # where position_ids start
    pad: int | None = None  # pad_token_id's default (position_ids from padding_idx + 1)
    factors: int = 1  # how many leading keys multiply into the channels (FunASR: mel bins × stacked frames)


FAMILIES = {
    "marian": Table({"d_model": 1024, "max_position_embeddings": 1024}, False, FROM_ZERO),
    "pegasus": Table({"d_model": 1024, "max_position_embeddings": 1024}, False, FROM_ZERO),
    "ctrl": Table({"n_embd": 1280, "n_positions": 256}, False, FROM_ZERO),
    "pegasus_x": Table({"d_model": 1024, "max_position_embeddings": 16384}, True, FROM_ZERO),
    "tipsv2_text_model": Table({"hidden_size": 768, "max_position_embeddings": 64}, True, FROM_ZERO),
    "m2m_100": Table({"d_model": 1024, "max_position_embeddings": 1024}, True, FROM_PADDING, 1),
    "nllb-moe": Table({"d_model": 1024, "max_position_embeddings": 1024}, True, FROM_PADDING, 1),
    "fsmt": Table({"d_model": 1024, "max_position_embeddings": 1024}, True, FROM_PADDING, 1),
    "xglm": Table({"d_model": 1024, "max_position_embeddings": 2048}, True, FROM_PADDING, 1),
    "kosmos_2_5_text_model": Table({"embed_dim": 1536, "max_position_embeddings": 4096}, True, FROM_PADDING, 1),
    "kosmos_2_text_model": Table({"embed_dim": 2048, "max_position_embeddings": 2048}, True, FROM_PADDING, 1),
    "speech_to_text": Table({"d_model": 256, "max_source_positions": 6000, "max_target_positions": 1024}, True,
                            FROM_PADDING, 1),
    "fun_asr_nano_encoder": Table({"num_mel_bins": 80, "num_stacked_frames": 7, "max_position_embeddings": 2049}, True,
                                  FROM_ONE, factors=2),
}


def read(cfg: ModelConfig) -> list[Role]:
    table = FAMILIES[cfg.architecture]
    sized = {key: cfg.count(key, default) for key, default in table.defaults.items()}
    keys = list(sized)
    width, sizes, d = " × ".join(keys[:table.factors]), keys[table.factors:], math.prod(list(sized.values())[:table.factors])
    half = d // 2
    if d % 2 or half < 2:
        cfg.fail(keys[0], sized[keys[0]], f"the sinusoid needs an even width ≥ 4 ({width} = {d})")
    start = table.start if table.start != FROM_PADDING else \
        f"pad_token_id + 1 = {cfg.number('pad_token_id', table.pad, integer=True) + 1}"
    base = 10000.0 ** (half / (half - 1)) if table.fairseq else 10000.0
    notes = (f"x is what the model adds the table to (its token embeddings, FunASR's stacked input features, scaled "
             f"as the model scales them) [batch, seq, {width}]; position_ids "
             f"start at {start} (the model's own ids)",
             f"the model's table is sized by {', '.join(f'{k} = {sized[k]}' for k in sizes)}; the graph "
             "is exact past them too" + ("; base = 10000^((d/2)/(d/2 − 1)) is fairseq's ln(10000)/(d/2 − 1) rule"
                                         if table.fairseq else ""))
    return [Role("sinusoidal", "sinusoidal", {"d_model": d, "base": base, "pair_layout": "concat"}, (), notes,
                 FAIRSEQ if table.fairseq else VASWANI)]


FAMILY = Family(tuple(FAMILIES), read, "sinusoidal ([sin | cos])")
