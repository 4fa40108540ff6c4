"""Whisper: the encoder adds a fixed sinusoid, the decoder a learned table.

Encoder: transformers' `sinusoids(length, channels)` (which filled `encoder.embed_positions.weight`)
has its own timescale rule, ω_i = exp(−i · ln(10000) / (d/2 − 1)), i < d/2, laid out [sin | cos]. That is
posexport's sinusoidal encoding with all sines first (`--pair-layout concat`) and base
b = 10000^((d/2)/(d/2 − 1)), since b^(−2i/d) = 10000^(−i/(d/2 − 1)). The model always uses positions
0 … max_source_positions − 1 (1500: 30 s of audio); the graph covers any position.
Decoder: `decoder.embed_positions.weight`, max_target_positions rows, 0-based position_ids.
"""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe, WhisperSinusoidRecipe

DECODER_TABLE = ("model.decoder.embed_positions.weight", "decoder.embed_positions.weight")
MAX_TIMESCALE = 10000.0


def read(cfg: ModelConfig) -> list[Role]:
    d = cfg.number("d_model", 384, integer=True)
    frames = cfg.number("max_source_positions", 1500, integer=True)
    half = d // 2
    if d % 2 or half < 2:
        cfg.fail("d_model", d, "Whisper's sinusoid needs an even d_model ≥ 4")
    encoder = Role(
        "sinusoidal-encoder", "sinusoidal",
        {"d_model": d, "base": MAX_TIMESCALE ** (half / (half - 1)), "pair_layout": "concat"},
        (),  # added once, to the encoder's input
        ("x is the encoder's conv output [batch, frames, d_model]; position_ids are 0 … frames − 1 "
         f"(the model always runs max_source_positions = {frames} frames)",
         "base = 10000^((d/2)/(d/2 − 1)) is Whisper's timescale rule ln(10000)/(d/2 − 1) in posexport's terms"),
        WhisperSinusoidRecipe(),
    )
    path, key = cfg.locate(DECODER_TABLE)
    decoder = Role(
        "learned-decoder", "learned",
        {"weights": str(path), "key": key, "max_positions": cfg.number("max_target_positions", 448, integer=True)},
        (), ("x is the decoder's token embeddings [batch, seq, d_model]; position_ids are 0-based",),
        LearnedRecipe(key=key),
    )
    return [encoder, decoder]


FAMILY = Family(("whisper",), read, "sinusoidal (encoder), learned (decoder)")
