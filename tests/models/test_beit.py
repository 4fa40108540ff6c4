"""BEiT's relative-position bias: Data2Vec-Vision's copy of it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import read_model  # noqa: E402

import zoo  # noqa: E402
from ..harness import bias_roles_agree_with_hf  # noqa: E402


def test_data2vec_vision_bias_as_its_own_copy_of_beits(tmp_path):
    """Per-layer tables read back from a checkpoint, against Data2VecVisionRelativePositionBias itself."""
    from transformers.models.data2vec.modeling_data2vec_vision import Data2VecVisionRelativePositionBias

    folder = zoo.tiny("data2vec-vision", tmp_path / "data2vec-vision", use_relative_position_bias=True,
                           image_size=64, patch_size=16)
    shape = tuple(Data2VecVisionRelativePositionBias(zoo.config_class("data2vec-vision").from_pretrained(folder),
                                                     window_size=(4, 4)).relative_position_bias_table.shape)
    rng = np.random.default_rng(0)
    save_file({f"encoder.layer.{i}.attention.attention.relative_position_bias.relative_position_bias_table":
               rng.standard_normal(shape).astype(np.float32) for i in range(4)}, str(folder / "model.safetensors"))
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == [f"beit-bias-{i}" for i in range(4)]
    bias_roles_agree_with_hf(plan, rng, (2, 4, 17, 17))
