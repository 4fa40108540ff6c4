"""T5's bias and its copies: each copy's own attention's compute_bias."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import read_model  # noqa: E402

import zoo  # noqa: E402
from ..harness import bias_roles_agree_with_hf  # noqa: E402


@pytest.mark.parametrize("model_type", ["switch_transformers", "pop2piano"])
def test_t5_copies_bias_as_their_own_attention(tmp_path, model_type):
    """T5's attention copied: random encoder and decoder tables read back from a checkpoint, the graph's
    reference against the copy's own compute_bias (queries at the end, as with a cache)."""
    from posexport.models.t5 import TABLE

    folder = zoo.tiny(model_type, tmp_path / model_type)
    rng = np.random.default_rng(0)
    save_file({TABLE.format(stack=stack, block=0): rng.standard_normal((32, 4)).astype(np.float32)
               for stack in ("encoder", "decoder")}, str(folder / "model.safetensors"))
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["t5-encoder", "t5-decoder"]
    bias_roles_agree_with_hf(plan, rng, (1, 4, 5, 300))
