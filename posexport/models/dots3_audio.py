"""Dots3-Note's audio tower (Dots3NoteAudioModel): rope in every layer's attention, Dots3NoteAudioRotaryEmbedding
and the module's apply_rotary_pos_emb: half-split pairs over the leading rotary_dim = int(head_dim ·
partial_rotary_factor) channels of q and k, the rest passed through. Its position_ids are 0 … frames − 1 of each
audio chunk (the feature extractor cuts chunk_length seconds, 60 s: 750 frames after the stem's three stride-2
convolutions), so positions restart in every chunk.

transformers' config class, followed here: partial_rotary_factor 0.5 unless the config sets one (top level or in
rope_parameters), rope_theta 10000, max_position_embeddings 6000; head_dim is always hidden_size //
num_attention_heads and num_key_value_heads num_attention_heads (values in config.json are overwritten); a
released config's Whisper-style `whisper_config` replaces hidden_size, num_attention_heads, num_hidden_layers and
max_position_embeddings (its d_model, encoder_attention_heads, encoder_layers, max_source_positions).
"""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values, top_block

WHISPER_KEYS = {"d_model": "hidden_size", "encoder_attention_heads": "num_attention_heads",
                "encoder_layers": "num_hidden_layers", "max_source_positions": "max_position_embeddings"}


def read(cfg: ModelConfig) -> list[Role]:
    legacy = cfg.get("whisper_config", {})
    if not isinstance(legacy, dict):
        cfg.fail("whisper_config", legacy, "expected an object")
    data = {"num_hidden_layers": 32, **cfg.data, **{WHISPER_KEYS[k]: v for k, v in legacy.items() if k in WHISPER_KEYS}}
    folded = ModelConfig(data, cfg.architecture, cfg.source, cfg.folder)
    hidden, heads = folded.count("hidden_size", 1280), folded.count("num_attention_heads", 20)
    if hidden % heads:
        folded.fail("hidden_size", hidden, f"transformers needs it divisible by num_attention_heads = {heads}")
    folded.data.update(head_dim=hidden // heads, num_key_value_heads=heads)
    name, block = top_block(folded)
    values = rope_values(folded, block, head_dim=hidden // heads, heads=heads, block_name=name,
                         max_positions=folded.number("max_position_embeddings", 6000, integer=True),
                         theta=folded.number("rope_theta", 10000.0), partial=folded.get("partial_rotary_factor", 0.5))
    hf = hf_rope("dots3_note.modeling_dots3_note", "Dots3NoteAudioRotaryEmbedding")
    role = rope_role(values, folded, hf, notes=("position_ids restart at 0 in every audio chunk (a batch row of "
                                                "input_features): 0 … frames − 1",))
    cfg.ignore(*folded.read)
    folded.check_all_read()
    return [role]


FAMILY = Family(("dots3_note_audio_encoder",), read, "rope (partial), restarting every audio chunk")
