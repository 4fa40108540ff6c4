"""Readers equal to transformers on its defaults, registry-wide: each config-read rope type's config.json written
with only the tiny sizes — no rope block, no rope_theta, no layer_types — is read as transformers' config class
fills it in. Its rope (inverse frequencies and attention factor) is held to the rotary module transformers makes of
that same file, and its layer plan to the plan posexport reads from the config the class itself saves (every default
written out, which tests/models/test_catalogue.py holds to transformers' own layers).

Types whose defaults are not read yet are listed with transformers' rule; each listed type must still differ, so the
list only shrinks (a type fixed on its family's reader fails here until it is taken off).

Then the generic blocks: --from-config reads every rope block --from-model reads (a LongRoPE block carrying factor, as
transformers' own test configs write it; yarn's mscale_all_dim 0), both equal to transformers' rope init functions."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, model_frequencies  # noqa: E402
from .test_catalogue import ROPE_TYPES  # noqa: E402

# A decoder's default layer_types (or the sliding window its NoPE rule reads) that posexport's reader does not
# compute yet: transformers' rule, for the reader that will.
PLAN_PENDING = {
    **dict.fromkeys(("cohere2", "cohere2_moe", "cohere2_vision", "aya_vision"),
                    "sliding_window defaults to 4096, so every 4th (full-attention) layer is NoPE"),
    **dict.fromkeys(("exaone4", "exaone4_5", "exaone_moe"), "sliding_window defaults to 4096: every 4th layer is global and NoPE"),
    "kolibri1": "sliding_window defaults to 513: every 5th (full-attention) layer is NoPE",
    "flint": "layer_types default full, full, then sliding with full every 3rd from layer 5; sliding_window 513",
    "beam": "layer_types default sliding with full at layers 5, 7, …; sliding_window 512",
    **dict.fromkeys(("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "jev", "minicpm_ocr",
                     "minicpmv4_6", "minicpmv4_7"), "full_attention_interval defaults to 4: the other layers are linear attention"),
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), "every 4th layer indexed attention, the others linear attention"),
    "lara_mini": "layer_types default linear, sliding, linear, full, …",
    "minimax": "layer_types default alternate full and linear attention",
    **dict.fromkeys(("lfm3", "lfm3_vl"), "layer_types default conv layers with full and sliding attention between"),
    **dict.fromkeys(("laguna", "mellum"), "layer_types default every layer full attention"),
    "mimo_v2_flash": "layer_types default full every 5th from layer 0, the others sliding",
    **dict.fromkeys(("modernbert", "modernbert-decoder", "modernvbert"), "global_attn_every_n_layers 3, counted from layer 0"),
    **dict.fromkeys(("ultrabert", "ultravbert"), "every 3rd layer global, counted from layer 2"),
    "zaya": "layer_types default every layer hybrid (attention and Mamba)",
    "hrm_text": "its layers are H_layers and L_layers cycles, not num_hidden_layers",
}
# A wrapper whose config class gives its text model defaults of its own (voxtral: rope_theta 1e8).
ROPE_PENDING = {"voxtral": "VoxtralConfig gives its text_config rope_theta 1e8 when the file writes none"}
ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta", "layer_types")


def minimal(model_type: str, folder: Path) -> Path:
    """config.json with the tiny sizes only (and a multimodal type's text_config of them): what transformers' config
    class would fill in, left for it to fill in — a rope block a size needs (M-RoPE sections) is kept."""
    cls = zoo.config_class(model_type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = cls(**zoo.CONSTRUCT.get(model_type, {}))
        text = default.get_text_config()
    sized = zoo.sized(cls if text is default else type(text), model_type)
    written = {k: v for k, v in sized.items() if k not in ROPE_KEYS or k in zoo.EXTRA.get(model_type, {})}
    body = written if text is default else {**zoo.CONSTRUCT.get(model_type, {}), **zoo.BESIDE_TEXT.get(model_type, {}),
                                             "text_config": {"model_type": text.model_type, **written}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, **body}))
    return folder


def rope_gaps(folder: Path) -> list[str]:
    """Each rope role whose frequencies or attention factor differ from transformers' rotary module of the same file."""
    plan, gaps = read_model(folder), []
    for role in plan.roles:
        if role.encoding != "rope":
            continue
        p = get_encoding("rope").params(**role.values)
        session = oracle.session(Built(get_encoding("rope"), p, plan.manifest_entry(role)), plan.manifest_entry(role))
        theirs, their_factor = model_frequencies(session, role)
        ours, factor = scaling.frequencies(p)
        if ours.shape != theirs.shape or np.max(np.abs(ours - theirs)) > 1e-6 * np.max(theirs) or abs(factor - their_factor) > 1e-6:
            gaps.append(f"{role.role}: posexport {p.scaling} base {p.base:g} over {2 * len(ours)} channels, factor {factor:.4f}; "
                        f"transformers {2 * len(theirs)} channels, factor {their_factor:.4f}")
    return gaps


def layer_plan(folder: Path) -> list[tuple]:
    return [(lp.rope, lp.scales) for lp in read_model(folder).layer_plan()]


@pytest.mark.parametrize("model_type", ROPE_TYPES)
def test_a_config_without_rope_keys_is_read_as_transformers_fills_it(tmp_path, model_type):
    folder = minimal(model_type, tmp_path / "minimal")
    same_plan = layer_plan(folder) == layer_plan(zoo.tiny(model_type, tmp_path / "saved"))
    assert same_plan != (model_type in PLAN_PENDING), (
        f"{model_type}: {'now read as transformers fills it: take it off PLAN_PENDING' if same_plan else 'its default layer plan is misread'}")
    if model_type in PLAN_PENDING:
        return  # its roles follow its misread layer types
    gaps = rope_gaps(folder)
    assert bool(gaps) == (model_type in ROPE_PENDING), gaps or f"{model_type}: now read right: take it off ROPE_PENDING"


@pytest.mark.parametrize("model_type, scaling_, factor, base, attention_factor, roles", [
    ("gpt_oss", "yarn", 32.0, 150000.0, 0.1 * np.log(32.0) + 1, ["rope"]),
    ("apertus", "llama3", 8.0, 12000000.0, 1.0, ["rope"]),
    ("ministral3", "yarn", 16.0, 1000000.0, 1.0, ["rope", "query-scale"]),
])
def test_default_scalings_of_the_config_classes(tmp_path, model_type, scaling_, factor, base, attention_factor, roles):
    """The issue's three: no rope block in config.json, and transformers' config class fills in a scaling."""
    plan = read_model(minimal(model_type, tmp_path))
    assert [r.role for r in plan.roles] == roles
    p = get_encoding("rope").params(**plan.roles[0].values)
    assert (p.scaling, p.factor, p.base) == (scaling_, factor, base)
    assert abs(scaling.frequencies(p)[1] - attention_factor) < 1e-9
    assert rope_gaps(tmp_path) == []


# Rope blocks as transformers' own tests and published configs write them; each is read alike by --from-config and
# --from-model, and both equal transformers' rope init function on the same config.
BLOCKS = {
    "longrope with factor": {"rope_type": "longrope", "factor": 2.0, "original_max_position_embeddings": 1024,
                             "short_factor": [1.1] * 8, "long_factor": [2.0 + 0.1 * i for i in range(8)]},
    "longrope, older type key, factor and attention_factor": {
        "type": "longrope", "factor": 4.0, "attention_factor": 1.2, "original_max_position_embeddings": 512,
        "short_factor": [1.0 + 0.05 * i for i in range(8)], "long_factor": [3.0] * 8},
    "yarn mscale_all_dim 0": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 128,
                              "mscale": 1.0, "mscale_all_dim": 0},
    "yarn mscale over mscale_all_dim": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64,
                                        "mscale": 0.707, "mscale_all_dim": 1.0, "beta_fast": 16, "beta_slow": 2},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 256, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0},
    "linear": {"rope_type": "linear", "factor": 3.0},
}
LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4,
         "intermediate_size": 32, "num_hidden_layers": 1, "vocab_size": 10, "max_position_embeddings": 2048,
         "rope_theta": 50000.0}


@pytest.mark.parametrize("name", BLOCKS)
def test_from_config_reads_every_block_from_model_reads_as_transformers_computes_it(tmp_path, name):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from posexport.rope import config

    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "rope_scaling": BLOCKS[name]}))
    from_config = config.from_config_file(tmp_path / "config.json")
    from_model = read_model(tmp_path).roles[0].values
    assert from_config == {k: v for k, v in from_model.items() if k != "pair_layout"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = LlamaConfig(**{**LLAMA, "rope_scaling": BLOCKS[name]})
    their_inv, their_factor = ROPE_INIT_FUNCTIONS[theirs.rope_parameters["rope_type"]](theirs, "cpu")
    ours, factor = scaling.frequencies(get_encoding("rope").params(**from_config))
    their_inv = their_inv.double().numpy()  # transformers forms them in float32
    assert np.max(np.abs(ours - their_inv)) <= 1e-6 * np.max(their_inv)
    assert abs(factor - their_factor) < 1e-12


def test_mscale_all_dim_0_is_transformers_not_given_and_a_negative_one_is_refused(tmp_path):
    """transformers' yarn: `if mscale and mscale_all_dim` — 0 falls back to g(s, 1) = 0.1·ln 16 + 1 ≈ 1.277."""
    from posexport.errors import PosexportError
    from posexport.rope import config

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "rope_scaling": BLOCKS["yarn mscale_all_dim 0"]}))
    assert scaling.frequencies(get_encoding("rope").params(**config.from_config_file(path)))[1] == pytest.approx(
        0.1 * np.log(16.0) + 1, abs=1e-15)
    path.write_text(json.dumps({**LLAMA, "rope_scaling": {**BLOCKS["yarn mscale_all_dim 0"], "mscale_all_dim": -1}}))
    with pytest.raises(PosexportError, match=r"rope_scaling.mscale_all_dim = -1: must be a finite number ≥ 0"):
        config.from_config_file(path)
