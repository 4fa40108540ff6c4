"""Reading model folders (posexport.models): published-style config.json with their legacy spellings,
read the way transformers reads them, and every position key either understood or an error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from posexport.errors import PosexportError
from posexport.models import read_model, supported_architectures
from posexport.models.build import build_model, compress

from zoo import LLAMA3, SMALL, raw


def values(folder: Path, role: str | None = None) -> dict:
    plan = read_model(folder)
    return (plan.role(role) if role else plan.roles[0]).values


def test_llama31_published_rope_scaling(tmp_path):
    folder = raw(tmp_path / "llama", {"model_type": "llama", **SMALL, "max_position_embeddings": 131072,
                                      "rope_theta": 500000.0, "rope_scaling": dict(LLAMA3)})
    assert values(folder) == {"head_dim": 16, "heads": 4, "base": 500000.0, "max_positions": 131072, "pair_layout": "half",
                              "scaling": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_positions": 8192}


def test_pythia_reads_rotary_pct_and_rotary_emb_base(tmp_path):
    folder = raw(tmp_path / "pythia", {"model_type": "gpt_neox", **SMALL, "max_position_embeddings": 2048,
                                       "rotary_pct": 0.25, "rotary_emb_base": 10000})
    got = values(folder)
    assert (got["rotary_dim"], got["head_dim"], got["base"]) == (4, 16, 10000.0)


def test_phi3_su_is_longrope_with_the_top_level_original(tmp_path):
    factors = [1.0] * 8
    folder = raw(tmp_path / "phi3", {"model_type": "phi3", **SMALL, "max_position_embeddings": 131072,
                                     "original_max_position_embeddings": 4096,
                                     "rope_scaling": {"type": "su", "short_factor": factors, "long_factor": factors}})
    got = values(folder)
    assert (got["scaling"], got["original_max_positions"], got["rotary_dim"]) == ("longrope", 4096, 16)


def test_gemma3_published_config_has_two_roles_with_their_layers(tmp_path):
    folder = raw(tmp_path / "g3", {"model_type": "gemma3_text", **SMALL, "num_hidden_layers": 12, "head_dim": 16,
                                   "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                                   "rope_scaling": {"rope_type": "linear", "factor": 8.0}})
    plan = read_model(folder)
    local, full = plan.role("rope-local"), plan.role("rope-global")
    assert full.layers == (5, 11) and len(local.layers) == 10
    assert (local.values["base"], local.values["scaling"]) == (10000.0, "default")
    assert (full.values["base"], full.values["scaling"], full.values["factor"]) == (1000000.0, "linear", 8.0)


def test_deepseek_rotates_qk_rope_head_dim_with_yarn_mscale(tmp_path):
    folder = raw(tmp_path / "ds", {"model_type": "deepseek_v2", **SMALL, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                                   "max_position_embeddings": 163840,
                                   "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                                                    "mscale": 0.707, "mscale_all_dim": 0.707}})
    got = values(folder)
    assert (got["head_dim"], got["pair_layout"], got["mscale"], got["mscale_all_dim"]) == (8, "interleaved", 0.707, 0.707)


def test_glm4_is_partial_and_interleaved(tmp_path):
    folder = raw(tmp_path / "glm", {"model_type": "glm4", **SMALL, "head_dim": 16})
    got = values(folder)
    assert (got["rotary_dim"], got["pair_layout"]) == (8, "interleaved")


def write_t5(folder: Path) -> Path:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    tables = {f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight": rng.standard_normal((16, 4)).astype(np.float32)
              for stack in ("encoder", "decoder")}
    raw(folder, {"model_type": "t5", "num_heads": 4, "num_layers": 3, "relative_attention_num_buckets": 16,
                 "relative_attention_max_distance": 32, "d_model": 32})
    save_file(tables, str(folder / "model.safetensors"))
    return folder


def test_t5_builds_an_encoder_and_a_decoder_graph_from_the_checkpoint(tmp_path):
    built = build_model(write_t5(tmp_path / "tiny-t5"))
    assert [b.name for b in built] == ["tiny-t5-t5-encoder", "tiny-t5-t5-decoder"]
    assert [b.artifact.params.bidirectional for b in built] == [True, False]
    assert built[0].artifact.manifest["model"]["layers"] == [0, 1, 2]


def fails(folder: Path, *fragments: str) -> None:
    with pytest.raises(PosexportError) as e:
        read_model(folder)
    message = str(e.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_type_not_read_says_why_in_one_line(tmp_path):
    """A pending type names its reason, a type without positions says so, a misspelt one the nearest type read."""
    fails(raw(tmp_path / "pending", {"model_type": "reformer"}), "'reformer' is not read yet: ", "axial")
    fails(raw(tmp_path / "ssm", {"model_type": "mamba"}), "'mamba' has no positional encoding to build: ")
    fails(raw(tmp_path / "typo", {"model_type": "qwen33"}), "'qwen33' is not a transformers model type", "did you mean 'qwen3'?")
    assert "qwen3" in supported_architectures()


def test_unknown_position_key_is_an_error_naming_key_value_and_architecture(tmp_path):
    fails(raw(tmp_path / "m", {"model_type": "llama", **SMALL, "rope_foo": 3}), "'rope_foo'", "3", "llama")


@pytest.mark.parametrize("extra, fragments", [
    ({"rope_theta": 500000.0}, ("'rope_theta'", "gpt_neox", "rotary_emb_base")),
    ({"partial_rotary_factor": 0.5}, ("'partial_rotary_factor'", "rotary_pct")),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}, "rope_parameters": {"rope_type": "default"}}, ("'rope_scaling'",)),
    ({"rope_scaling": {"type": "linear", "factor": 2.0, "beta_fast": 3}}, ("'beta_fast'", "linear")),
])
def test_neox_keys_transformers_would_ignore_or_misread_are_errors(tmp_path, extra, fragments):
    fails(raw(tmp_path / "m", {"model_type": "gpt_neox", **SMALL, **extra}), *fragments)


@pytest.mark.parametrize("config, fragments", [
    ({"model_type": "llama", **SMALL, "original_max_position_embeddings": 4096}, ("'original_max_position_embeddings'", "llama")),
    ({"model_type": "mpt", "n_heads": 4, "attn_config": {"alibi": True, "alibi_bias_max": 16}}, ("alibi_bias_max", "16")),
    ({"model_type": "falcon", **SMALL, "alibi": True}, ("'alibi'", "falcon")),
    ({"model_type": "bert", "position_embedding_type": "relative_key"}, ("relative_key", "bert")),
    ({"model_type": "qwen2", **SMALL, "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}, ("mrope",)),
])
def test_what_posexport_cannot_reproduce_is_refused(tmp_path, config, fragments):
    fails(raw(tmp_path / "m", config), *fragments)


def test_encoding_must_agree_with_the_model(tmp_path):
    folder = raw(tmp_path / "m", {"model_type": "llama", **SMALL})
    with pytest.raises(PosexportError, match="uses rope"):
        build_model(folder, encoding="t5")


def test_folder_errors_are_one_line(tmp_path):
    fails(tmp_path / "absent", "not a folder")
    (tmp_path / "empty").mkdir()
    fails(tmp_path / "empty", "no config.json")
    raw(tmp_path / "t5", {"model_type": "t5", "num_heads": 4})
    fails(tmp_path / "t5", "no weights")


def test_layer_spans_are_compressed():
    assert compress((0, 1, 2, 5, 7, 8)) == "0-2, 5, 7-8"


def test_manifest_records_the_model(tmp_path):
    folder = raw(tmp_path / "tiny", {"model_type": "mistral", **SMALL})
    (built,) = build_model(folder)
    model = built.artifact.manifest["model"]
    assert (built.name, model["architecture"], model["role"], model["layers"]) == ("tiny-rope", "mistral", "rope", [0, 1])
    assert json.dumps(model)


def preset_folder(tmp_path: Path, name: str) -> Path:
    from posexport.rope import config

    return raw(tmp_path / name, config.preset_config(name))


def test_bundled_presets_read_the_same_as_from_config(tmp_path):
    """The published configs behind the presets (Llama-2/3.1, Phi-3-128k, Qwen2.5-YaRN, Vicuna-16k) give the
    same rope parameters through --from-model as through --preset."""
    from posexport.registry import get_encoding
    from posexport.rope import config

    rope = get_encoding("rope")
    for name in config.preset_names():
        (role,) = read_model(preset_folder(tmp_path, name)).roles
        assert rope.params(**role.values) == rope.params(**config.from_preset(name)), name


def test_mpt_nested_position_keys_are_checked_too(tmp_path):
    fails(raw(tmp_path / "m", {"model_type": "mpt", "n_heads": 4, "attn_config": {"alibi": True, "rope": True}}),
          "attn_config.rope", "mpt")


@pytest.mark.parametrize("config, fragments", [
    ({"model_type": "muse_spark_text", **SMALL, "rope_theta": 20000.0}, ("'rope_theta'", "muse_spark_text", "rope_parameters")),
    ({"model_type": "granite_swa", **SMALL, "layer_rope_theta": [10000.0]}, ("'layer_rope_theta'", "2 rope bases")),
    ({"model_type": "granite_swa", **SMALL, "layer_rope_theta": [10000.0, -1]}, ("'layer_rope_theta'", "-1")),
    ({"model_type": "mllama_text_model", **SMALL, "cross_attention_layers": "3"}, ("'cross_attention_layers'",)),
    ({"model_type": "jetmoe", **SMALL, "kv_channels": 8, "head_dim": 16}, ("'head_dim'", "kv_channels")),
    ({"model_type": "zamba2", **SMALL}, ("'use_mem_rope'", "no positional encoding")),
    ({"model_type": "recurrent_gemma", **SMALL, "rope_parameters": {"rope_type": "linear", "factor": 2.0}},
     ("rope_type", "default rope type only")),
    ({"model_type": "recurrent_gemma", **SMALL, "block_types": ["recurrent", "mlp"]}, ("'block_types'", "mlp")),
    ({"model_type": "mistral4", **SMALL, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "rope_parameters": {
        "rope_type": "yarn", "factor": 4.0, "partial_rotary_factor": 0.25, "llama_4_scaling_beta": 0.1}},
     ("partial_rotary_factor", "qk_rope_head_dim = 16")),
])
def test_layer_plan_keys_transformers_would_ignore_or_cannot_take_are_errors(tmp_path, config, fragments):
    fails(raw(tmp_path / "m", config), *fragments)


@pytest.mark.parametrize("model_type, layers", [("olmo_hybrid", 6), ("olmo_hybrid", 2), ("muse_spark_text", 6),
                                                ("muse_glimmer_text", 5), ("granite_swa", 3), ("mllama_text_model", 9)])
def test_plans_without_their_layer_keys_take_the_config_classes_defaults(tmp_path, model_type, layers):
    """A hand-written config without layer_types, layer_rope_theta, cross_attention_layers or rope_parameters:
    the plan is the one transformers' config class fills in."""
    from transformers import AutoConfig

    folder = raw(tmp_path / "m", {"model_type": model_type, **SMALL, "num_hidden_layers": layers})
    plan, config = read_model(folder), AutoConfig.from_pretrained(folder)
    cross = set(getattr(config, "cross_attention_layers", []))
    thetas = getattr(config, "layer_rope_theta", None) or [config.rope_parameters["rope_theta"]] * layers
    types = getattr(config, "layer_types", None) or ["full_attention"] * layers
    theirs = [None if i in cross or not thetas[i] or types[i] == "linear_attention" else float(thetas[i])
              for i in range(layers)]
    assert [None if (r := plan.layer_rope(i)) is None else r.values["base"] for i in range(layers)] == theirs


@pytest.mark.parametrize("model_type", ["dory"])
def test_ropes_per_layer_type_without_rope_parameters_take_the_config_classes_bases(tmp_path, model_type):
    """No rope_parameters: each layer rotates at its type's base from the config class's own per-type default."""
    from transformers import AutoConfig

    folder = raw(tmp_path / "m", {"model_type": model_type, **SMALL, "num_hidden_layers": 8, "n_input_layers": 1,
                                  "n_output_layers": 1})
    plan, config = read_model(folder), AutoConfig.from_pretrained(folder)
    theirs = [config.rope_parameters[t]["rope_theta"] for t in config.layer_types]
    assert [plan.layer_rope(i).values["base"] for i in range(8)] == theirs
