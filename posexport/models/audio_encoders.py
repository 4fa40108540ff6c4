"""Whisper-style audio encoders read as their own types: Qwen2-Audio's, AudioFlamingo-3's, Voxtral's and
MOSS-Transcribe-Diarize's towers add `embed_positions.weight` (a trained table of max_source_positions rows,
Whisper's decoder form rather than its encoder's sinusoid) whole to the convolutions' output, frame f at row
f: the learned encoding at position_ids 0 … frames − 1."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe

# the table's rows: max_source_positions, default 1500 in each config class
FAMILIES = ("qwen2_audio_encoder", "audioflamingo3_encoder", "voxtral_encoder", "moss_transcribe_diarize_audio")
TABLE = ("embed_positions.weight", "audio_tower.embed_positions.weight")


def read(cfg: ModelConfig) -> list[Role]:
    path, key = cfg.locate(TABLE)
    rows = cfg.count("max_source_positions", 1500)
    notes = ("x is the encoder's convolution output [batch, frames, hidden]; position_ids are 0 … frames − 1",
             f"the model adds all max_source_positions = {rows} rows (its input is padded to that many frames)")
    return [Role("learned-encoder", "learned", {"weights": str(path), "key": key, "max_positions": rows, "row_offset": 0},
                 (), notes, LearnedRecipe(key=key))]


FAMILY = Family(FAMILIES, read, "learned table (max_source_positions frames)")
