"""Dots3-Note's audio tower: its own rope, and a released whisper-style config read as transformers reads it."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.dtypes import DTYPES  # noqa: E402
from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import model_bound  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, feeds_for, model_frequencies, normalised_error  # noqa: E402


def test_dots3_note_audio_rope_is_its_towers_own(tmp_path):
    """Dots3-Note's audio tower: the float64 frequencies are its rotary module's inv_freq; the reference is the
    hf runtime at positions from 0 and from 5000; in the tower's own forward on two random chunks (the second one
    shorter), every q its attention rotates is the reference at positions 0 … frames − 1 of its own chunk. Every
    channel rotated (partial_rotary_factor dropped), or positions running on into the second chunk, fail."""
    import importlib

    import torch

    folder = zoo.tiny("dots3_note_audio_encoder", tmp_path / "dots3", adapter_input_size=64, num_hidden_layers=2,
                           feature_size=16, downsample_hidden_size=8)
    plan = read_model(folder)
    (role,) = plan.roles
    assert role.layers == (0, 1) and role.values["rotary_dim"] == 8  # partial_rotary_factor 0.5 of head_dim 16
    encoding, entry = get_encoding(role.encoding), plan.manifest_entry(role)
    p = encoding.params(**role.values)
    session = oracle.session(Built(encoding, p, entry), entry)
    theirs, their_factor = model_frequencies(session, role)
    ours, factor = scaling.frequencies(p)
    assert np.max(np.abs(ours - theirs)) <= 1e-6 * np.max(theirs) and abs(factor - their_factor) < 1e-6
    for feeds in feeds_for(encoding, p, np.random.default_rng(0)):
        exact, largest = encoding.reference(p, feeds), int(feeds["position_ids"].max())
        error = normalised_error(session.run(feeds), exact)
        assert error < model_bound(DTYPES["float32"].bound(largest), largest)
    module = importlib.import_module(role.hf.module)
    config = zoo.config_class("dots3_note_audio_encoder").from_pretrained(folder)
    torch.manual_seed(0)
    tower, rotated, apply = module.Dots3NoteAudioModel(config).eval(), [], module.apply_rotary_pos_emb

    def noted(q, k, cos, sin, *args, **kwargs):
        out = apply(q, k, cos, sin, *args, **kwargs)
        rotated.append((q.transpose(1, 2).double().numpy(), out[0].transpose(1, 2).double().numpy()))
        return out

    features = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float32))
    module.apply_rotary_pos_emb = noted
    try:
        with torch.no_grad():
            tower(features, torch.tensor([64, 40]) * config.hop_length)
    finally:
        module.apply_rotary_pos_emb = apply
    assert len(rotated) == 2 and rotated[0][0].shape == (2, 8, 4, 16)  # [chunks, frames, heads, head_dim]
    restarting = np.tile(np.arange(8), (2, 1))
    whole = encoding.params(**{**role.values, "rotary_dim": 16})

    def worst(params, positions):  # relative to the largest rotated value
        return max(np.max(np.abs(encoding.reference(params, {"x": q, "position_ids": positions}) - out)) / np.max(np.abs(out))
                   for q, out in rotated)

    assert worst(p, restarting) < 1e-6
    assert worst(whole, restarting) > 0.1 and worst(p, np.arange(16).reshape(2, 8)) > 0.1


def test_dots3_note_audio_reads_a_released_whisper_config_as_transformers_does(tmp_path):
    """A released config's whisper_config (d_model, encoder_attention_heads, max_source_positions) and a head_dim
    transformers overwrites: the rope's heads, head_dim and max_positions are those transformers' config class loads."""
    import json

    folder = zoo.tiny("dots3_note_audio_encoder", tmp_path / "saved", adapter_input_size=64)
    raw = {**json.loads((folder / "config.json").read_text()), "head_dim": 7,
           "whisper_config": {"d_model": 64, "encoder_attention_heads": 2, "max_source_positions": 100}}
    (tmp_path / "released").mkdir()
    (tmp_path / "released" / "config.json").write_text(json.dumps(raw))
    loaded = zoo.config_class("dots3_note_audio_encoder").from_pretrained(tmp_path / "released")
    (role,) = read_model(tmp_path / "released").roles
    assert (role.values["heads"], role.values["head_dim"], role.values["max_positions"], role.values["rotary_dim"]) == \
        (loaded.num_attention_heads, loaded.head_dim, loaded.max_position_embeddings, 16) == (2, 32, 100, 16)
