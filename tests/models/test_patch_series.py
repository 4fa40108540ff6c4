"""PatchTST and PatchTSMixer: the encoders' own tables; PatchTSMixer without positions refused."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built  # noqa: E402


PATCH_SERIES = {"patchtst": ("patchtst", "PatchTSTModel", {"context_length": 20, "patch_length": 4, "patch_stride": 3}),
                "patchtsmixer": ("patchtsmixer", "PatchTSMixerModel", {"context_length": 20, "patch_length": 4, "patch_stride": 3,
                                                                      "use_positional_encoding": True})}


@pytest.mark.parametrize("model_type, cls_token, kind", [("patchtst", False, "sincos"), ("patchtst", True, "random"),
                                                         ("patchtsmixer", False, "sincos"), ("patchtsmixer", False, "random")])
def test_patch_series_tables_are_the_encoders_own(tmp_path, model_type, cls_token, kind):
    """transformers' own tiny model holding a random table read back from a checkpoint: what its positional encoder
    adds to random patch embeddings of every channel (its output less its input; PatchTST's class token takes
    row 0) is the graph's reference at 0 … rows − 1; the hf runtime reads the same. The "sincos" table it
    initialises is Vaswani's interleaved sinusoid less its mean over 10 × its std, which posexport's
    sinusoidal is not (so the table is read)."""
    import importlib

    import torch

    from posexport.models import patch_series

    name, cls, sizes = PATCH_SERIES[model_type]
    extra = {"positional_encoding_type": kind, **({"use_cls_token": True} if cls_token else {})}
    folder = zoo.tiny(model_type, tmp_path / model_type, d_model=16, num_input_channels=3, **sizes, **extra)
    config = zoo.config_class(model_type).from_pretrained(folder)
    fresh = type(config)()
    assert (fresh.patch_length, fresh.patch_stride, fresh.context_length) == (*patch_series.FAMILIES[model_type], 32)
    torch.manual_seed(0)
    model = getattr(importlib.import_module(f"transformers.models.{name}.modeling_{name}"), cls)(config).eval()
    encoder = model.encoder.positional_encoder
    rows = 6 + cls_token  # (20 − 4) // 3 + 1 patches
    initial = encoder.position_enc.detach().double().numpy()
    if kind == "sincos":  # what the model initialises, against the formula in float64
        x = np.random.default_rng(2).standard_normal((1, rows, 16))
        vaswani = (get_encoding("sinusoidal").reference(get_encoding("sinusoidal").params(d_model=16), {
            "x": x, "position_ids": np.arange(rows)[None]}) - x)[0]
        assert np.max(np.abs(initial - (vaswani - vaswani.mean()) / (vaswani.std(ddof=1) * 10))) < 1e-6
        assert np.max(np.abs(initial - vaswani)) > 0.5
    encoder.position_enc.data = torch.from_numpy(zoo.table_checkpoint(folder, f"model.{patch_series.TABLE}", (rows, 16)))
    patches = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 3, rows - cls_token, 16)).astype(np.float32))
    with torch.no_grad():
        out = encoder(patches)
    added = (out[:, :, cls_token:] - patches).double().numpy()
    if cls_token:
        added = np.concatenate([(out[:, :, :1] - encoder.cls_token.detach()).double().numpy(), added], axis=2)
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    feeds = {"x": np.random.default_rng(0).standard_normal((6, rows, 16)), "position_ids": np.tile(np.arange(rows), (6, 1))}
    ours = encoding.reference(p, feeds)
    assert role.values["max_positions"] == rows and np.max(np.abs(ours - (feeds["x"] + added.reshape(6, rows, 16)))) < 1e-6
    assert recipe_problem(plan.manifest_entry(role)) == ""  # parity's hf runtime reads the same table
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    assert np.max(np.abs(session.run(feeds) - ours)) < 1e-5


def test_patchtsmixer_without_positions_is_refused_in_one_line(tmp_path):
    """PatchTSMixer's default adds no position code: one PosexportError naming use_positional_encoding."""
    from posexport.errors import PosexportError

    folder = zoo.tiny("patchtsmixer", tmp_path / "patchtsmixer")
    with pytest.raises(PosexportError, match=r"'use_positional_encoding' = false: PatchTSMixer then adds no position code") as raised:
        read_model(folder)
    assert "\n" not in str(raised.value)
