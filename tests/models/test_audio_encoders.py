"""Whisper-style audio encoders' tables: the rows the encoders add."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import audio_encoders, read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import own_model  # noqa: E402


@pytest.mark.parametrize("model_type", audio_encoders.FAMILIES)
def test_audio_encoder_tables_add_the_rows_the_encoders_add(tmp_path, model_type):
    """transformers' own tiny encoder holding a random table read back from a checkpoint: what reaches its
    first layer on a forward of random mel features, less the same with the table zeroed, is the graph's
    reference at position_ids 0 … max_source_positions − 1."""
    import torch
    from transformers import AutoConfig

    folder = zoo.tiny(model_type, tmp_path / model_type, max_source_positions=8)
    config = AutoConfig.from_pretrained(folder)
    assert type(config)().max_source_positions == 1500
    torch.manual_seed(0)
    model = own_model(config).eval()
    table = model.embed_positions.weight
    table.data = torch.from_numpy(zoo.table_checkpoint(folder, "embed_positions.weight", tuple(table.shape)))
    reached = []
    model.layers[0].register_forward_pre_hook(lambda _m, args: reached.append(args[0].double().numpy()))
    features = torch.from_numpy(np.random.default_rng(1).standard_normal((1, config.num_mel_bins, 16)).astype(np.float32))
    mask = {"input_features_mask": torch.ones(1, 16)} if model_type == "audioflamingo3_encoder" else {}  # a required mask
    with torch.no_grad():
        model(features, **mask)
        table.data.zero_()
        model(features, **mask)
    (role,) = read_model(folder).roles
    encoding = get_encoding(role.encoding)
    x = np.random.default_rng(0).standard_normal((1, 8, table.shape[1]))
    ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.arange(8)[None]})
    assert np.max(np.abs(ours - (x + reached[0] - reached[1]))) < 1e-5
