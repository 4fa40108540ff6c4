"""Swin's window biases: each block's own."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import oracle, read_model, swin  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, own_model  # noqa: E402


@pytest.mark.parametrize("model_type", sorted(swin.FAMILIES))
def test_swin_window_biases_are_the_blocks_own(tmp_path, model_type):
    """Random per-block tables, saved under the names transformers' own model gives them, read back: the
    graph's reference against the block's bias as the model computes it (Swin's SwinRelativePositionBias, or
    a copy's self-attention adding it inline), window 3, two stages of 2 and 4 heads."""
    from transformers import AutoConfig

    family = swin.FAMILIES[model_type]
    folder = zoo.tiny(model_type, tmp_path / model_type, depths=[1, 1], window_size=3, **{family.heads: [2, 4]})
    names = own_model(AutoConfig.from_pretrained(folder)).state_dict()
    rng = np.random.default_rng(0)
    tables = {next(k for k in swin.table_keys(stage, 0, family) if k in names): rng.standard_normal((25, heads))
              for stage, heads in enumerate((2, 4))}
    save_file({k: v.astype(np.float32) for k, v in tables.items()}, str(folder / "model.safetensors"))
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["swin-s0b0", "swin-s1b0"]
    for role, heads in zip(plan.roles, (2, 4)):
        encoding = get_encoding(role.encoding)
        p = encoding.params(**role.values)
        assert recipe_problem(plan.manifest_entry(role)) == ""  # the hf runtime accepts the recipe
        session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
        feeds = {"scores": rng.standard_normal((2, heads, 9, 9)).astype(np.float32)}
        assert np.max(np.abs(session.run(feeds) - encoding.reference(p, feeds))) < 1e-5, role.role
