"""The rope decoders read one line each (decoders.py) and Gemma-4's: their defaults against the config classes', per-
layer ropes, heads sized otherwise than hidden_size, layer-type plans and query scaling against transformers' own
layers, and misread forms and bases failing against the model."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import decoders, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import rotations_in_transformers  # noqa: E402


SPELLED = {"global": "full_attention", "local": "sliding_attention"}


def test_decoder_defaults_are_the_config_classes_own():
    """Each line's defaults (used when a published config leaves a key out) are transformers'."""
    def declared(cls, name):
        for klass in cls.__mro__:
            if name in vars(klass) and not isinstance(vars(klass)[name], (property, dataclasses.Field)):
                return vars(klass)[name]
        return None

    for model_type, spec in decoders.DECODERS.items():
        cls = zoo.config_class(model_type)
        text = type(cls().get_text_config()) if spec.text else cls
        theta = declared(text, "default_theta")
        assert declared(text, "max_position_embeddings") == spec.max_positions, model_type
        assert declared(text, "head_dim") == spec.head_dim, model_type
        if isinstance(theta, dict):  # ModernBERT says global / local
            theta = {SPELLED.get(k, k): v for k, v in theta.items()}
        if isinstance(spec.theta, dict) and not isinstance(theta, dict):
            continue  # a per-type default the class keeps in its rope_parameters default (checked by the walk)
        assert (theta if isinstance(theta, dict) else float(theta)) == spec.theta, model_type


def cos_of(role, positions: np.ndarray) -> np.ndarray:
    """float64 cos of a half-split rope role's angles at these positions, [positions, head_dim]: the frequencies
    repeated over both halves, as transformers' rotary modules hand them to apply_rotary_pos_emb."""
    inv_freq, factor = scaling.frequencies(get_encoding("rope").params(**role.values))
    angles = positions[:, None] * inv_freq[None, :]
    return np.cos(np.concatenate([angles, angles], axis=-1)) * factor


@pytest.mark.parametrize("model_type", ["granite_swa", "muse_glimmer_text", "muse_spark", "molmo2_text", "molmo2", "dory"])
def test_per_layer_ropes_are_the_cos_each_layer_rotates_with(tiny_models, model_type):
    """Per layer, the cos transformers' forward hands apply_rotary_pos_emb is the float64 cos of that layer's
    role (Granite-SWA: its own base per layer; MuSE: rope_theta on every rope layer, whatever the entry;
    Molmo2: yarn on rope_scaling_layers, the unscaled rope on the others; Dory: per layer type, its (attention,
    mlp) block pairs read as layers, its recurrent layers looped)."""
    plan = read_model(tiny_models[model_type])
    rotated = rotations_in_transformers(tiny_models[model_type])
    positions = np.arange(5, dtype=np.float64)
    for layer, seen in enumerate(rotated):
        assert (seen is None) == (plan.layer_rope(layer) is None), layer
        if seen is not None:
            theirs = seen[1].double().numpy()[0]
            assert np.max(np.abs(cos_of(plan.layer_rope(layer), positions) - theirs)) < 1e-6, layer
    if model_type == "muse_glimmer_text":  # read per base (as Granite-SWA), layer 2's 20000 would miss the model
        misread = dataclasses.replace(plan.layer_rope(2), values={**plan.layer_rope(2).values, "base": 20000.0})
        assert np.max(np.abs(cos_of(misread, positions) - rotated[2][1].double().numpy()[0])) > 1e-3
    if model_type == "molmo2_text":  # read scaled on every layer, layer 1 would miss the model
        assert np.max(np.abs(cos_of(plan.role("rope-scaled"), positions) - rotated[1][1].double().numpy()[0])) > 1e-3


@pytest.mark.parametrize("model_type", ["jetmoe", "zamba2"])
def test_heads_not_sized_by_hidden_size_are_the_q_the_attention_rotates(tiny_models, model_type):
    """JetMoE's q is num_key_value_heads × num_experts_per_tok heads of kv_channels (8 in the fixture), Zamba2's
    heads are 2·hidden_size / num_attention_heads (32), neither hidden_size // num_attention_heads (16): the
    plan's sizes are those its attention hands the apply function."""
    from transformers import AutoConfig

    rope = read_model(tiny_models[model_type]).role("rope").values
    shapes = {rotated[0] for rotated in rotations_in_transformers(tiny_models[model_type]) if rotated is not None}
    assert shapes == {(1, rope["heads"], 5, rope["head_dim"])}
    config = AutoConfig.from_pretrained(tiny_models[model_type])
    assert rope["head_dim"] != config.hidden_size // config.num_attention_heads  # the misread the reader avoids


@pytest.mark.parametrize("model_type", ["olmo3", "modernbert", "dory"])
def test_per_layer_type_plans_match_transformers_layer_types(tiny_models, model_type):
    from transformers import AutoConfig

    plan = read_model(tiny_models[model_type])
    types = AutoConfig.from_pretrained(tiny_models[model_type]).layer_types
    assert [plan.layer_rope(i).hf.layer_type for i in range(plan.layer_count)] == types


@pytest.mark.parametrize("model_type, floor", [("ministral3", 16384), ("mistral4", 8192)])
def test_query_scale_plan_is_every_layer(tiny_models, model_type, floor):
    plan = read_model(tiny_models[model_type])
    assert [lp.describe() for lp in plan.layer_plan()] == ["rope + query-scale"] * 4
    scale = plan.role("query-scale").values
    assert (scale["beta"], scale["floor_scale"], scale["offset"]) == (0.1, floor, 0)


def test_a_misread_form_fails_against_the_model(tiny_models, tmp_path):
    """Cohere's interleaved pairs built as half-split: every hf comparison fails."""
    from posexport import export

    plan = read_model(tiny_models["cohere"])
    wrong = export.build("rope", {**plan.roles[0].values, "pair_layout": "half"}, backend="portable")
    onnx_path, _ = export.save(wrong, tmp_path, "cohere-half")
    report = run_model_parity(tiny_models["cohere"], onnx_path, ["ort-cpu"], seqs=(17,), batches=(1,), properties=False)
    assert [r.status for r in report.results if r.runtime == "hf"] and all(
        r.status == "fail" for r in report.results if r.runtime == "hf")


def test_a_graph_at_another_layer_base_fails_against_the_model(tiny_models, tmp_path):
    """Granite-SWA's layer 2 rotates at its own base (500000): the graph of the 10000 layers, claimed for it,
    fails every hf comparison (the session runs the rotary module built at that layer's base)."""
    from posexport import export

    plan = read_model(tiny_models["granite_swa"])
    wrong = export.build("rope", plan.role("rope-theta10000").values, backend="portable")
    entry = plan.manifest_entry(plan.role("rope-theta500000"))
    assert recipe_problem(entry) == "" and "rope_theta" in recipe_problem({**entry, "hf": {**entry["hf"], "rope_theta": "1e4"}})
    wrong.manifest["model"] = entry
    onnx_path, _ = export.save(wrong, tmp_path, "granite-swa-wrong-base")
    report = run_model_parity(tiny_models["granite_swa"], onnx_path, ["ort-cpu"], seqs=(17,), batches=(1,), properties=False)
    assert [r.status for r in report.results if r.runtime == "hf"] and all(
        r.status == "fail" for r in report.results if r.runtime == "hf")
