"""Fixed sinusoid tables (fairseq's and Vaswani's): the rows transformers adds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model, sinusoids  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, model_inputs, own_model  # noqa: E402


@pytest.mark.parametrize("model_type", sorted(set(sinusoids.FAMILIES) - {"fun_asr_nano_encoder"}))
def test_sinusoid_tables_add_the_rows_transformers_adds(tmp_path, model_type):
    """transformers' own tiny model on a forward of 9 tokens: the rows each part's sinusoid module returns
    (CTRL: its pos_encoding buffer, which it indexes by 0-based position_ids) are the graph's reference at the
    position_ids the reader says the model uses (from 0 or padding_idx + 1), for the encoder and the decoder."""
    import torch
    from transformers import AutoConfig

    folder = zoo.tiny(model_type, tmp_path / model_type)
    config = AutoConfig.from_pretrained(folder)
    table = sinusoids.FAMILIES[model_type]
    fresh = type(config)()
    assert {k: getattr(fresh, k) for k in table.defaults} == table.defaults
    assert table.pad is None or fresh.pad_token_id == table.pad
    torch.manual_seed(0)
    model = own_model(config).eval()
    added = [model.pos_encoding[:9]] if model_type == "ctrl" else []
    for module in (m for m in model.modules() if type(m).__name__.endswith("SinusoidalPositionalEmbedding")):
        module.register_forward_hook(lambda _m, _a, rows: added.append(rows.reshape(-1, rows.shape[-1])[:9].clone()))
    tokens = torch.tensor([[i for i in range(2, 64) if i != config.pad_token_id][:9]])
    with torch.no_grad():
        model(**model_inputs(model, config, tokens))
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    start = 0 if table.start == sinusoids.FROM_ZERO else config.pad_token_id + 1
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 9, getattr(config, next(iter(table.defaults))))),
             "position_ids": np.arange(9)[None] + start}
    ours = encoding.reference(p, feeds)
    assert len(added) == 1 + config.is_encoder_decoder
    for rows in added:
        assert np.max(np.abs(ours - (feeds["x"] + rows.double().numpy()))) < 1e-5
    assert recipe_problem(plan.manifest_entry(role)) == ""  # parity's hf runtime runs it and agrees
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    assert np.max(np.abs(session.run(feeds) - ours)) < 1e-5
