"""Gemma-4: the assistant rotates its queries alone, each layer with its layer type's rope."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402

import zoo  # noqa: E402


def test_gemma4_assistant_rotates_its_queries_alone_with_each_layer_types_rope(tmp_path):
    """A draft step of the assistant, the target model's keys given: transformers rotates one tensor per layer, the
    queries (4 heads, not the 2 key heads), with the cos of the read role of that layer's type at the position given."""
    import torch
    import transformers.models.gemma4.modeling_gemma4 as gemma4
    from transformers import AutoConfig
    from transformers.models.gemma4_assistant.modeling_gemma4_assistant import Gemma4AssistantForCausalLM

    folder = zoo.tiny("gemma4_assistant", tmp_path / "assistant")
    config = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    model = Gemma4AssistantForCausalLM(config).eval()
    rotated, apply = [], gemma4.apply_rotary_pos_emb

    def noted(x, cos, sin, **kwargs):
        rotated.append((x.shape, cos[0, 0].double().numpy()))
        return apply(x, cos, sin, **kwargs)

    shared = {kind: (torch.randn(1, 2, 7, dim), torch.randn(1, 2, 7, dim)) for kind, dim in
              (("full_attention", 32), ("sliding_attention", 16))}
    gemma4.apply_rotary_pos_emb = noted
    try:
        with torch.no_grad():
            model(inputs_embeds=torch.randn(1, 1, 2 * config.backbone_hidden_size), position_ids=torch.tensor([[7]]),
                  shared_kv_states=shared)
    finally:
        gemma4.apply_rotary_pos_emb = apply
    plan = read_model(folder)
    assert len(rotated) == plan.layer_count == 4
    for layer, (shape, cos) in enumerate(rotated):
        role = plan.layer_rope(layer)
        angles = 7 * scaling.frequencies(get_encoding("rope").params(**role.values))[0]
        assert tuple(shape) == (1, 1, 4, role.values["head_dim"]) and any("queries alone" in n for n in role.notes)
        assert np.max(np.abs(np.cos(np.concatenate([angles, angles])) - cos)) < 1e-5, role.role
