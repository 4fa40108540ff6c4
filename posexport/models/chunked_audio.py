"""Qwen2.5-Omni's, Qwen3-Omni-MoE's and Qwen3-ASR's audio encoders: Whisper's encoder sinusoid
(SinusoidsPositionEmbedding: ω_i = exp(−i · ln(10000) / (d/2 − 1)), [sin | cos]; whisper.py) added per audio
chunk, positions restarting at 0 in every chunk.

The encoder cuts each audio's mel frames into chunks of 2·n_window frames (the last one the remainder r, when
there is one), runs its convolutions on every chunk alone, and adds the table's rows 0 … t − 1 to a chunk's t
output frames, before the frames of all chunks are packed into one sequence:
- Qwen2.5-Omni: conv1 (stride 1) then conv2 (kernel 3, stride 2, padding 1): a full chunk gives n_window frames,
  the last one (r − 1)//2 + 1;
- Qwen3-Omni-MoE and Qwen3-ASR: three Conv2d of kernel 3, stride 2, padding 1 over (mel, time): a full chunk
  gives ⌈⌈⌈2·n_window / 2⌉ / 2⌉ / 2⌉ frames (13 at n_window 50), the last one the same count of r. Their
  encoders count a full chunk as 13 frames whatever n_window is (_get_feat_extract_output_lengths: Qwen3-Omni
  picks its valid frames by it, Qwen3-ASR its attention windows), so a config whose convolutions give another
  count is refused: its model misplaces frames.
The table holds max_source_positions rows (Qwen3-ASR: max_position_embeddings, 13): the model fails when a
chunk's frames outnumber them, and so does the reader.
"""

from __future__ import annotations

from typing import NamedTuple

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import WhisperSinusoidRecipe

MAX_TIMESCALE = 10000.0
COUNTED = 13  # the frames of a full chunk in the Qwen3 encoders' _get_feat_extract_output_lengths


class Encoder(NamedTuple):
    d_model: int  # the config class's defaults
    n_window: int
    rows_key: str  # the key sizing SinusoidsPositionEmbedding
    rows: int
    convolutions: int  # stride-2 convolutions over time


FAMILIES = {
    "qwen2_5_omni_audio_encoder": Encoder(1280, 100, "max_source_positions", 1500, 1),
    "qwen3_omni_moe_audio_encoder": Encoder(1280, 50, "max_source_positions", 1500, 3),
    "qwen3_asr_encoder": Encoder(1024, 50, "max_position_embeddings", 13, 3),
}


def frames(mel_frames: int, convolutions: int) -> int:
    """Frames out of stride-2 convolutions of kernel 3 and padding 1: ⌈n / 2⌉ each."""
    for _ in range(convolutions):
        mel_frames = (mel_frames - 1) // 2 + 1
    return mel_frames


def read(cfg: ModelConfig) -> list[Role]:
    encoder = FAMILIES[cfg.architecture]
    d = cfg.count("d_model", encoder.d_model)
    half = d // 2
    if d % 2 or half < 2:
        cfg.fail("d_model", d, "Whisper's sinusoid needs an even d_model ≥ 4")
    n_window = cfg.count("n_window", encoder.n_window)
    rows = cfg.count(encoder.rows_key, encoder.rows)
    chunk = frames(2 * n_window, encoder.convolutions)
    if encoder.convolutions == 3 and chunk != COUNTED:
        cfg.fail("n_window", n_window, f"a chunk of {2 * n_window} mel frames gives {chunk} frames after the three "
                 f"stride-2 convolutions, but the encoder counts {COUNTED} (n_window 49 … 52): its model misplaces frames")
    if chunk > rows:
        cfg.fail(encoder.rows_key, rows, f"the table has fewer rows than a chunk's {chunk} frames "
                 f"(n_window = {n_window}); the model cannot add it")
    last = "(r − 1)//2 + 1" if encoder.convolutions == 1 else "⌈⌈⌈r/2⌉/2⌉/2⌉"
    notes = (f"x is the convolutions' output of an audio's chunks (Qwen3: after conv_out) [chunks, frames, d_model]; "
             f"position_ids are 0 … frames − 1 in every chunk: positions restart every {chunk} frames (a chunk of "
             f"2·n_window = {2 * n_window} mel frames; the last chunk, of r mel frames, has {last} frames)",
             f"the model only ever adds rows 0 … {chunk - 1} of its table ({encoder.rows_key} = {rows} rows); the graph "
             "is exact past them too; base = 10000^((d/2)/(d/2 − 1)) is Whisper's timescale rule")
    values = {"d_model": d, "base": MAX_TIMESCALE ** (half / (half - 1)), "pair_layout": "concat"}
    return [Role("sinusoidal-chunk", "sinusoidal", values, (), notes, WhisperSinusoidRecipe())]


FAMILY = Family(tuple(FAMILIES), read, "sinusoidal ([sin | cos]), restarting every audio chunk")
