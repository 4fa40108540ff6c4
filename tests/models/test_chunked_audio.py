"""Chunked audio encoders: the sinusoid from 0 in every chunk; configs their models misplace refused."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built  # noqa: E402


# Qwen's chunked audio encoders: (modeling module, encoder class, stride-2 convolutions over time, tiny sizes).
CHUNKED_AUDIO = {
    "qwen2_5_omni_audio_encoder": ("qwen2_5_omni", "Qwen2_5OmniAudioEncoder", 1, {"n_window": 4}),
    "qwen3_omni_moe_audio_encoder": ("qwen3_omni_moe", "Qwen3OmniMoeAudioEncoder", 3, {"downsample_hidden_size": 8}),
    "qwen3_asr_encoder": ("qwen3_asr", "Qwen3ASREncoder", 3, {"downsample_hidden_size": 8}),
}


AUDIO_TINY = {"d_model": 64, "encoder_layers": 1, "encoder_attention_heads": 4, "encoder_ffn_dim": 32, "num_mel_bins": 16,
              "output_dim": 64}


def chunked_encoder(model_type, folder):
    import importlib

    module, name, _, _ = CHUNKED_AUDIO[model_type]
    config = zoo.config_class(model_type).from_pretrained(folder)
    return getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name)(config).eval()


def chunked_forward(model, model_type, features):
    """The encoder's own forward on one audio of mel features [mel, frames] (Qwen3-ASR: padded to whole chunks, with
    its mask)."""
    import torch

    if model_type != "qwen3_asr_encoder":
        return model(features, torch.tensor([features.shape[1]]))
    chunk, frames = 2 * model.n_window, features.shape[1]
    padded = torch.zeros(1, features.shape[0], -(-frames // chunk) * chunk)
    padded[0, :, :frames] = features
    return model(padded, (torch.arange(padded.shape[2]) < frames).long()[None])


@pytest.mark.parametrize("model_type", sorted(CHUNKED_AUDIO))
def test_chunked_audio_encoders_add_the_sinusoid_from_0_in_every_chunk(tmp_path, model_type):
    """The encoder's own forward on random mel features of two full chunks (2·n_window mel frames) and a shorter
    last one: what reaches its first layer, less the same with the sinusoid buffer zeroed, is the float64
    reference, the built graph and the hf runtime at positions 0 … t − 1 of each chunk (t its frames after the
    convolutions, ⌈n / 2⌉ each); positions running on across chunks (a misread) miss by order 1."""
    import torch

    from posexport.models import chunked_audio
    from posexport.models.build import build_model
    from posexport.runtimes import get_runtime

    _, _, convolutions, sizes = CHUNKED_AUDIO[model_type]
    folder = zoo.tiny(model_type, tmp_path / model_type, **AUDIO_TINY, **sizes)
    fresh, (role,) = zoo.config_class(model_type)(), read_model(folder).roles
    family = chunked_audio.FAMILIES[model_type]  # its defaults are the config class's
    assert (fresh.d_model, fresh.n_window, getattr(fresh, family.rows_key)) == (family.d_model, family.n_window, family.rows)
    torch.manual_seed(0)
    model = chunked_encoder(model_type, folder)
    reached = []
    model.layers[0].register_forward_pre_hook(lambda _m, args: reached.append(args[0].double().numpy()))
    chunk = 2 * model.n_window
    lengths = [chunk, chunk, chunk // 2 + 1]
    features = torch.from_numpy(np.random.default_rng(1).standard_normal((16, sum(lengths))).astype(np.float32))
    with torch.no_grad():
        chunked_forward(model, model_type, features)
        model.positional_embedding.positional_embedding.zero_()
        chunked_forward(model, model_type, features)
    added = reached[0] - reached[1]
    counts = []
    for length in lengths:
        for _ in range(convolutions):
            length = -(-length // 2)
        counts.append(length)
    assert added.shape == (sum(counts), 64) and counts[0] < counts[0] + counts[1] < added.shape[0]
    assert f"positions restart every {counts[0]} frames" in role.notes[0] and f"rows 0 … {counts[0] - 1} " in role.notes[1]
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    restarting = np.concatenate([np.arange(c) for c in counts])[None]
    x = np.random.default_rng(0).standard_normal((1, added.shape[0], 64))
    ours = encoding.reference(p, {"x": x, "position_ids": restarting})
    assert np.max(np.abs(ours - (x + added))) < 1e-5
    running_on = encoding.reference(p, {"x": x, "position_ids": np.arange(added.shape[0])[None]})
    assert np.max(np.abs(running_on - (x + added))) > 0.5
    (built,) = build_model(folder, backend="portable")
    feeds = {"x": x.astype(np.float32), "position_ids": restarting}
    assert np.max(np.abs(get_runtime("ort-cpu").load(built.artifact).run(feeds) - ours)) < 1e-5
    entry = read_model(folder).manifest_entry(role)
    assert recipe_problem(entry) == ""
    assert np.max(np.abs(oracle.session(Built(encoding, p, entry), entry).run(feeds) - ours)) < 1e-5


def test_chunked_audio_encoders_refuse_configs_their_models_misplace(tmp_path):
    """Qwen3-Omni at n_window 53: its convolutions make 14 frames of a full 106-frame chunk, 7 of a 54-frame one,
    but it counts 13 and hands its layers 33 frames of the 35; Qwen3-ASR with 12 table rows under 13-frame chunks
    cannot add the table. The reader refuses both in one line (at n_window 50 and 13 rows it reads them, above)."""
    import torch

    from posexport.errors import PosexportError

    sizes = {**AUDIO_TINY, "downsample_hidden_size": 8}
    folder = zoo.tiny("qwen3_omni_moe_audio_encoder", tmp_path / "omni", **sizes, n_window=53)
    with pytest.raises(PosexportError, match="'n_window' = 53: .* gives 14 frames .* counts 13"):
        read_model(folder)
    reached = []
    model = chunked_encoder("qwen3_omni_moe_audio_encoder", folder)
    model.layers[0].register_forward_pre_hook(lambda _m, args: reached.append(args[0].shape[0]))
    with torch.no_grad():
        chunked_forward(model, "qwen3_omni_moe_audio_encoder", torch.randn(16, 106 + 106 + 54))
    assert reached == [33]
    folder = zoo.tiny("qwen3_asr_encoder", tmp_path / "asr", **sizes, max_position_embeddings=12)
    with pytest.raises(PosexportError, match="'max_position_embeddings' = 12: the table has fewer rows than a chunk's 13"):
        read_model(folder)
    with torch.no_grad(), pytest.raises(RuntimeError):
        chunked_forward(chunked_encoder("qwen3_asr_encoder", folder), "qwen3_asr_encoder", torch.randn(16, 150))
