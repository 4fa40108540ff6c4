"""CLVP: its encoders' rotary, its decoder's table, each part read as its own."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402

import zoo  # noqa: E402
from ..harness import rope_roles_agree_with_hf, rows_the_table_adds  # noqa: E402


CLVP_ENCODER = {"hidden_size": 128, "num_attention_heads": 2, "projection_dim": 128, "num_hidden_layers": 2,
                "intermediate_size": 32, "vocab_size": 64}  # head_dim 64, rotary_dim max(128 // 4, 32) = 32


CLVP_DECODER = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "max_position_embeddings": 40,
                "max_text_tokens": 20, "num_mel_attn_blocks": 1, "vocab_size": 64, "feature_size": 16}


def test_clvp_encoder_rotary_is_its_own_and_a_misread_fails(tmp_path):
    """The encoder's partial rope (32 of 64 channels): ClvpRotaryPositionalEmbedding's frequencies, its apply
    function at the position_ids its forward gives the attention (0 … seq − 1); read over the whole head it fails."""
    import torch
    from transformers.models.clvp.modeling_clvp import ClvpEncoder

    folder = zoo.tiny("clvp_encoder", tmp_path / "clvp-encoder", **CLVP_ENCODER)
    torch.manual_seed(0)
    model = ClvpEncoder(zoo.config_class("clvp_encoder").from_pretrained(folder)).eval()
    seen = []
    model.layers[0].self_attn.register_forward_pre_hook(lambda _m, _a, kwargs: seen.append(kwargs["position_ids"].numpy()),
                                                        with_kwargs=True)
    with torch.no_grad():
        model(input_ids=torch.arange(4, 13)[None])
    plan = read_model(folder)
    (role,) = plan.roles
    assert (role.values["rotary_dim"], role.values["head_dim"], role.layers) == (32, 64, (0, 1))
    assert np.array_equal(seen[0], np.arange(9)[None])
    ours, _ = scaling.frequencies(get_encoding("rope").params(**role.values))
    theirs = model.rotary_pos_emb.inv_freq.double().numpy()
    assert np.max(np.abs(ours - theirs)) <= 1e-6 * np.max(theirs)
    rng = np.random.default_rng(0)
    rope_roles_agree_with_hf(plan, plan.roles, rng)
    rope_roles_agree_with_hf(plan, plan.roles, rng, misread={"rotary_dim": 64})


def test_clvp_decoder_table_adds_the_rows_its_decoder_adds(tmp_path):
    import torch
    from transformers.models.clvp.modeling_clvp import ClvpDecoder

    folder = zoo.tiny("clvp_decoder", tmp_path / "clvp-decoder", **CLVP_DECODER)
    torch.manual_seed(0)
    model = ClvpDecoder(zoo.config_class("clvp_decoder").from_pretrained(folder)).eval()
    added = rows_the_table_adds(model, "position_embeds_layer", folder, input_ids=torch.arange(4, 13)[None])
    (role,) = read_model(folder).roles
    encoding = get_encoding(role.encoding)
    x = np.random.default_rng(0).standard_normal((1, 9, 64))
    ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.arange(9)[None]})
    assert role.values["max_positions"] == 40 and np.max(np.abs(ours - (x + added))) < 1e-6


def test_clvp_reads_each_part_as_its_own(tmp_path):
    """The whole model: its text and speech encoders' ropes (of different widths) each against the rotary of
    its own sub-config, the decoder's table, and the conditioning encoder's text table against the rows it adds
    on a forward (from 0 over bos, text, eos); a checkpoint's float32 inv_freq buffers are read."""
    import torch
    from transformers import ClvpConfig
    from transformers.models.clvp.modeling_clvp import ClvpModelForConditionalGeneration

    speech = {**CLVP_ENCODER, "num_attention_heads": 4}  # head_dim 32, rotary_dim max(128 // 8, 32) = 32: the whole head
    text = {**CLVP_ENCODER, "vocab_size": 256}  # its bos token, which the conditioning encoder adds, is 255
    config = ClvpConfig(text_config=text, speech_config=speech, decoder_config=CLVP_DECODER)
    folder = tmp_path / "clvp"
    config.save_pretrained(folder)
    torch.manual_seed(0)
    model = ClvpModelForConditionalGeneration(config).eval()
    model.conditioning_encoder.text_position_embedding.weight.data.normal_()
    save_file({k: v.contiguous().numpy() for k, v in model.state_dict().items()
               if "position_embed" in k or "inv_freq" in k}, str(folder / "model.safetensors"))
    added = []
    model.conditioning_encoder.text_position_embedding.register_forward_hook(lambda _m, _a, rows: added.append(rows[0].double().numpy()))
    with torch.no_grad():
        model.conditioning_encoder(torch.randn(1, 16, 10), input_ids=torch.arange(4, 13)[None])
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["rope-text", "rope-speech", "learned-decoder", "learned-conditioning"]
    assert [r.values["rotary_dim"] for r in plan.roles[:2]] == [32, 32] and plan.roles[1].values["head_dim"] == 32
    rope_roles_agree_with_hf(plan, plan.roles[:2], np.random.default_rng(0))
    role = plan.role("learned-conditioning")
    encoding = get_encoding(role.encoding)
    x = np.random.default_rng(1).standard_normal((1, 11, 64))
    ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.arange(11)[None]})
    assert role.values["max_positions"] == 20 and np.max(np.abs(ours - (x + added[0]))) < 1e-6


def test_clvp_encoder_without_rope_as_rope_is_refused_in_one_line(tmp_path):
    folder = zoo.tiny("clvp_encoder", tmp_path / "clvp-encoder", **{**CLVP_ENCODER, "hidden_size": 32})
    with pytest.raises(PosexportError, match="rotary width .* = 32 is wider than head_dim 16") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)
