"""Patch tables added whole to a tower's tokens: the rows the towers add."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import patch_table, read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402


# model_type -> its embeddings class (module, name), tiny sizes, and the input its forward takes.
IMAGE = {"image_size": 32, "patch_size": 8}


PATCH_EMBEDDINGS = {
    "aimv2_vision_model": ("aimv2", "Aimv2VisionEmbeddings", IMAGE, (2, 3, 32, 32)),
    "ovis2_vision": ("ovis2", "Ovis2VisionEmbeddings", IMAGE, (2, 3, 32, 32)),
    "eomt": ("eomt", "EomtEmbeddings", IMAGE, (2, 3, 32, 32)),
    "videomt": ("videomt", "VideomtEmbeddings", IMAGE, (2, 3, 32, 32)),
    "mgp-str": ("mgp_str", "MgpstrEmbeddings", {"image_size": [16, 32], "patch_size": 8}, (2, 3, 16, 32)),
    "audio-spectrogram-transformer": ("audio_spectrogram_transformer", "ASTEmbeddings",
                                      {"num_mel_bins": 32, "max_length": 48}, (2, 48, 32)),
}


@pytest.mark.parametrize("model_type", sorted(patch_table.FAMILIES))
def test_patch_tables_add_the_rows_the_towers_add(tmp_path, model_type):
    """The tower's own embeddings class holding a random table read back from a checkpoint: what it adds on a
    forward of a random input (its output less its output with the table zeroed; the positioned tokens last)
    is the graph's reference at position_ids 0 … rows − 1."""
    import importlib

    import torch

    name, cls, sizes, shape = PATCH_EMBEDDINGS[model_type]
    folder = zoo.tiny(model_type, tmp_path / model_type, **sizes)
    embeddings = getattr(importlib.import_module(f"transformers.models.{name}.modeling_{name}"), cls)(
        zoo.config_class(model_type).from_pretrained(folder)).eval()
    (param,) = [n for n, _ in embeddings.named_parameters() if "pos" in n]
    assert patch_table.FAMILIES[model_type].table.endswith(f"embeddings.{param}")
    table = embeddings.get_parameter(param)
    table.data = torch.from_numpy(zoo.table_checkpoint(folder, patch_table.FAMILIES[model_type].table, tuple(table.shape)))
    (role,) = read_model(folder).roles
    rows = role.values["max_positions"]
    inputs = torch.from_numpy(np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    with torch.no_grad():
        placed = embeddings(inputs)[:, -rows:]
        table.data.zero_()
        added = (placed - embeddings(inputs)[:, -rows:]).double().numpy()
    encoding = get_encoding(role.encoding)
    x = np.random.default_rng(0).standard_normal((2, rows, 64))
    ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.tile(np.arange(rows), (2, 1))})
    assert table.numel() == rows * 64 and np.max(np.abs(ours - (x + added))) < 1e-5
