"""Bark's three sub-models: the rows each adds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402


def test_bark_sub_models_add_the_rows_they_add(tmp_path):
    """Bark's three sub-models, built by transformers from a tiny config, holding random tables read back from a
    checkpoint: the rows each position_embeds_layer returns on a forward of 9 tokens are the graph's reference
    at 0-based position_ids, role by role."""
    import torch
    from transformers import AutoConfig
    from transformers.models.bark import modeling_bark as bark

    tiny = {"hidden_size": 64, "num_layers": 1, "num_heads": 4, "block_size": 32, "input_vocab_size": 64,
            "output_vocab_size": 64}
    folder = zoo.tiny("bark", tmp_path / "bark", **{f"{part}_config": tiny for part in ("semantic", "coarse_acoustics", "fine_acoustics")})
    config, rng, added, tables = AutoConfig.from_pretrained(folder), np.random.default_rng(0), {}, {}
    models = {"semantic": bark.BarkSemanticModel(config.semantic_config),
              "coarse_acoustics": bark.BarkCoarseModel(config.coarse_acoustics_config),
              "fine_acoustics": bark.BarkFineModel(config.fine_acoustics_config)}
    for part, model in models.items():
        tables[f"{part}.position_embeds_layer.weight"] = table = rng.standard_normal((32, 64)).astype(np.float32)
        model.eval().position_embeds_layer.weight.data = torch.from_numpy(table)
        model.position_embeds_layer.register_forward_hook(lambda _m, _a, rows, part=part: added.__setitem__(part, rows[0].double().numpy()))
    save_file(tables, str(folder / "model.safetensors"))
    tokens = torch.arange(2, 11)[None]
    with torch.no_grad():
        models["semantic"](input_ids=tokens)
        models["coarse_acoustics"](input_ids=tokens)
        models["fine_acoustics"](codebook_idx=2, input_ids=tokens[..., None].repeat(1, 1, config.fine_acoustics_config.n_codes_total))
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == [f"learned-{part}" for part in models]
    x = rng.standard_normal((1, 9, 64))
    for part, role in zip(models, plan.roles):
        encoding = get_encoding(role.encoding)
        ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.arange(9)[None]})
        assert np.max(np.abs(ours - (x + added[part]))) < 1e-6, part
