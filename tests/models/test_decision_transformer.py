"""Decision Transformer: the tables its forward adds."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402



def test_decision_transformer_tables_add_the_rows_its_forward_adds(tmp_path):
    """Random tables in a checkpoint: on a forward of 5 steps the timestep table adds the rows at the given
    timesteps and the GPT-2 table row 0 to all 15 tokens; the GPT-2 table read at token indices (a misread) misses."""
    import torch
    from transformers import DecisionTransformerConfig, DecisionTransformerModel

    config = DecisionTransformerConfig(state_dim=3, act_dim=2, hidden_size=32, max_ep_len=50, n_positions=40, n_layer=1)
    folder = tmp_path / "dt"
    config.save_pretrained(folder)
    torch.manual_seed(0)
    model = DecisionTransformerModel(config).eval()
    tables = {"embed_timestep.weight": model.embed_timestep, "encoder.wpe.weight": model.encoder.wpe}
    for module in tables.values():
        module.weight.data.normal_()
    save_file({k: m.weight.detach().numpy() for k, m in tables.items()}, str(folder / "model.safetensors"))
    added = {}
    for key, module in tables.items():
        module.register_forward_hook(lambda _m, _a, rows, key=key: added.__setitem__(key, rows[0].double().numpy()))
    timesteps = torch.tensor([[7, 8, 9, 30, 31]])
    with torch.no_grad():
        model(states=torch.randn(1, 5, 3), actions=torch.randn(1, 5, 2), rewards=torch.randn(1, 5, 1),
              returns_to_go=torch.randn(1, 5, 1), timesteps=timesteps)
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["learned-timestep", "learned-gpt2"]
    encoding, rng = get_encoding("learned"), np.random.default_rng(0)

    def error(role, positions):
        p, x = encoding.params(**role.values), rng.standard_normal((1, positions.shape[1], 32))
        rows = added[role.hf.key]
        return np.max(np.abs(encoding.reference(p, {"x": x, "position_ids": positions}) - (x + rows)))

    assert error(plan.roles[0], timesteps.numpy()) < 1e-6
    assert error(plan.roles[1], np.zeros((1, 15), dtype=np.int64)) < 1e-6 and error(plan.roles[1], np.arange(15)[None]) > 0.1
