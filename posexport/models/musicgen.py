"""MusicGen and MusicGen-Melody: the decoder adds MusicgenSinusoidalPositionalEmbedding's fixed table to the sum
of its codebooks' token embeddings (not scaled: embed_scale is never applied). get_embedding is fairseq's
(tensor2tensor's) rule, ω_i = exp(−i · ln(10000) / (d/2 − 1)), i < d/2, but laid out [cos | sin], cosines first:
posexport's sinusoidal encoding with `--pair-layout concat-cos` and base 10000^((d/2)/(d/2 − 1)) (as Whisper's
encoder, whisper.py). Rows are taken at arange(seq) + cache_length: 0-based positions, continued while decoding.
MusicGen-Melody's decoder puts the conditioning states (projected text or chroma) before the audio tokens and
adds the table to the whole [conditioning | audio] sequence. An odd hidden_size gets a zero last channel in the
model; posexport's encoding has even widths only, so that is refused.

A whole model (`musicgen`, `musicgen_melody`) is read through its `decoder` config; its T5 text encoder's
relative bias and its EnCodec codec (no positions) are not built here."""

from __future__ import annotations

import dataclasses

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import SinusoidTableRecipe

DECODERS = {"musicgen_decoder": "musicgen", "musicgen_melody_decoder": "musicgen_melody"}
COMPOSITES = {"musicgen": "musicgen_decoder", "musicgen_melody": "musicgen_melody_decoder"}
FAMILIES = (*DECODERS, *COMPOSITES)
EMBEDDING = {"musicgen": "MusicgenSinusoidalPositionalEmbedding", "musicgen_melody": "MusicgenMelodySinusoidalPositionalEmbedding"}
ADDED_TO = {"musicgen": "the sum of the codebooks' token embeddings [batch, seq, hidden]",
            "musicgen_melody": "[conditioning states | the sum of the codebooks' token embeddings] [batch, seq, hidden]"}
COMPOSITE_NOTE = ("the decoder's positions (decoder config, model_type {inner}); the T5 text encoder's relative bias and "
                  "the EnCodec codec's (none) are not built")


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture in COMPOSITES:
        inner = COMPOSITES[cfg.architecture]
        data = cfg.get("decoder")
        if not isinstance(data, dict) or data.get("model_type", inner) != inner:
            cfg.fail("decoder", data, f"expected the {inner} config of its decoder")
        decoder = ModelConfig(data, inner, f"{cfg.source} decoder", cfg.folder)
        (role,) = read(decoder)
        decoder.check_all_read()
        return [dataclasses.replace(role, notes=(*role.notes, COMPOSITE_NOTE.format(inner=inner)))]
    family = DECODERS[cfg.architecture]
    d = cfg.number("hidden_size", 1024, integer=True)
    half = d // 2
    if d % 2 or half < 2:
        cfg.fail("hidden_size", d, "the model zero-pads an odd width's last channel; posexport's sinusoid needs an even "
                                   "hidden_size ≥ 4")
    rows = cfg.count("max_position_embeddings", 2048)
    notes = (f"x is {ADDED_TO[family]}; position_ids are 0 … seq − 1, continued from the cache length while decoding",
             f"the model's table starts with max_position_embeddings = {rows} rows and grows past them; the graph is "
             "exact past them too; base = 10000^((d/2)/(d/2 − 1)) is fairseq's ln(10000)/(d/2 − 1) rule, laid out "
             "[cos | sin]")
    return [Role("sinusoidal-decoder", "sinusoidal", {"d_model": d, "base": 10000.0 ** (half / (half - 1)),
                                                      "pair_layout": "concat-cos"}, (), notes,
                 SinusoidTableRecipe(module=f"transformers.models.{family}.modeling_{family}",
                                     create=EMBEDDING[family]))]


FAMILY = Family(FAMILIES, read, "sinusoidal ([cos | sin], the decoder's)")
