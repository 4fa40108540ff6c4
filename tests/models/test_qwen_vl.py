"""Qwen-VL and GLM-4V (M-RoPE) and their vision towers: the towers' lines, pos_embed and grids resampled as the
towers' own code, misreads failing against the model, sections off the rotary width refused."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.dtypes import DTYPES  # noqa: E402
from posexport.errors import PosexportError  # noqa: E402
from posexport.models import oracle, qwen_vl, read_model  # noqa: E402
from posexport.models.oracle import model_bound  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, feeds_for, normalised_error  # noqa: E402


@pytest.mark.parametrize("model_type, misread", [
    ("glm4v", {"pair_layout": "half"}),  # GLM-4V's interleaved pairs read half-split
    ("glm4v", {"rotary_dim": 16, "mrope_section": (4, 2, 2)}),  # its partial rotary read as the whole head
    ("glm4v_moe", {"pair_layout": "interleaved"}),  # GLM-4.5V's half-split pairs read interleaved
])
def test_a_misread_glm4v_m_rope_fails_against_the_model(tiny_models, tmp_path, model_type, misread):
    from posexport import export

    plan = read_model(tiny_models[model_type])
    assert all(plan.roles[0].values[k] != v for k, v in misread.items())
    wrong = export.build("mrope", {**plan.roles[0].values, **misread}, backend="portable")
    onnx_path, _ = export.save(wrong, tmp_path, f"{model_type}-misread")
    report = run_model_parity(tiny_models[model_type], onnx_path, ["ort-cpu"], seqs=(17,), batches=(1,), properties=False)
    assert [r.status for r in report.results if r.runtime == "hf"] and all(
        r.status == "fail" for r in report.results if r.runtime == "hf")


@pytest.mark.parametrize("block, message", [
    ({"mrope_section": [2, 1, 1], "partial_rotary_factor": 1.0}, "summing to rotary_dim/2 = 8"),  # transformers' split fails
    ({"mrope_section": [2, 1, 1], "partial_rotary_factor": 1.5}, "expected a number in \\(0, 1\\]"),
])
def test_glm4v_sections_off_its_rotary_width_refused_in_one_line(tmp_path, block, message):
    import json

    folder = zoo.tiny("glm4v_text", tmp_path / "glm4v-text")
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, **block}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(PosexportError, match=message) as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


def test_qwen3_vl_pos_embed_read_with_corners_aligned_and_a_misread_fails(tiny_models):
    """The vision tower's pos_embed role is bilinear with align_corners; the same table resampled with
    half-pixel centres misses transformers' own resampling at every grid but the trained one."""
    plan = read_model(tiny_models["qwen3_vl"])
    role = plan.role("vision-pos-embed")
    assert (role.values["interpolation"], role.values["align_corners"], role.values["trained_h"]) == ("bilinear", True, 6)
    encoding, rng = get_encoding("vit-learned"), np.random.default_rng(1)
    wrong = encoding.params(**{**role.values, "align_corners": False})
    session = oracle.session(Built(encoding, wrong, plan.manifest_entry(role)), plan.manifest_entry(role))
    errors = [np.max(np.abs(session.run(feeds) - encoding.reference(wrong, feeds))) for feeds in feeds_for(encoding, wrong, rng)]
    assert errors[0] < 1e-6 and min(errors[1:3]) > 0.1


def test_qwen3_vl_without_weights_says_its_pos_embed_was_not_built(tmp_path):
    folder = zoo.tiny("qwen3_vl", tmp_path / "qwen3-vl")
    (folder / "model.safetensors").unlink()
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["mrope", "mrope-vision"]
    assert any("pos_embed" in note and "not built" in note for note in plan.role("mrope-vision").notes)


def test_qwen_vl_tower_lines_are_the_towers_own(tmp_path):
    """Each vision tower line's defaults are its config class's, and it reads a learned grid (pos_embed, or GLM-4V's
    grid) exactly where the tower's own models (built from its tiny config, on the meta device) hold one."""
    import importlib
    import inspect

    import torch
    from transformers import AutoConfig, PreTrainedModel

    for model_type, tower in qwen_vl.TOWERS.items():
        assert tuple(getattr(zoo.config_class(model_type)(), key) for key in (tower.width, tower.heads, tower.depth)) \
            == tower.defaults, model_type
        config = AutoConfig.from_pretrained(zoo.tiny(model_type, tmp_path / model_type))
        module = importlib.import_module(f"transformers.models.{tower.module}.modeling_{tower.module}")
        towers = [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, PreTrainedModel)
                  and getattr(c, "config_class", None) is type(config)]
        assert towers, model_type
        for cls in towers:
            with torch.device("meta"):
                names = list(cls(config).state_dict())
            assert any("pos_embed" in n or "position_embedding" in n for n in names) == bool(tower.pos_embed or tower.grid), cls


@pytest.mark.parametrize("model_type", sorted(qwen_vl.TOWERS))
def test_a_qwen_vl_tower_alone_reads_its_own_rope_theta_and_a_misread_fails(tmp_path, model_type):
    """A tower's own config saying rope_theta 100: read, the tower's rotary agrees; the default 10000 (a
    misread) misses it at every case."""
    folder = zoo.tiny(model_type, tmp_path / model_type, rope_parameters={"rope_type": "axial", "rope_theta": 100.0})
    plan = read_model(folder)
    role = plan.role("mrope-vision")
    assert (role.values["base"], role.layers, plan.layer_count) == (100.0, (0, 1), 2)
    encoding, entry, rng = get_encoding("mrope"), plan.manifest_entry(role), np.random.default_rng(0)
    errors = {}
    for base in (100.0, 10000.0):
        p = encoding.params(**{**role.values, "base": base})
        session = oracle.session(Built(encoding, p, entry), entry)
        errors[base] = [normalised_error(session.run(f), encoding.reference(p, f)) for f in feeds_for(encoding, p, rng)]
    bound = model_bound(DTYPES["float32"].bound(5016), 5016)
    assert max(errors[100.0]) < bound and min(errors[10000.0]) > 100 * bound, errors


def test_a_qwen_vl_tower_without_a_table_refuses_a_table_size_in_one_line(tmp_path):
    folder = zoo.tiny("qwen2_5_vl_vision", tmp_path / "tower", num_position_embeddings=36)
    with pytest.raises(PosexportError, match="'num_position_embeddings' = 36") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("model_type", ["glm4v_vision", "glm4v_moe_vision"])
def test_glm4v_tower_grid_is_bicubic_as_its_grid_sample_and_a_misread_fails(tmp_path, model_type):
    """GLM-4V's grid_sample (bicubic, border padding) at each patch's centre is vit-learned's bicubic at every grid;
    read as bilinear it misses the tower's own embeddings at every grid but the trained one."""
    folder = zoo.tiny(model_type, tmp_path / model_type)
    plan = read_model(folder)
    role = plan.role("vision-pos-embed")
    encoding, entry, rng = get_encoding("vit-learned"), plan.manifest_entry(role), np.random.default_rng(1)
    errors = {}
    for interpolation in ("bicubic", "bilinear"):
        p = encoding.params(**{**role.values, "interpolation": interpolation})
        session = oracle.session(Built(encoding, p, entry), entry)
        errors[interpolation] = [np.max(np.abs(session.run(f) - encoding.reference(p, f))) for f in feeds_for(encoding, p, rng)]
    assert max(errors["bicubic"]) < 1e-5 and errors["bilinear"][0] < 1e-5 and min(errors["bilinear"][1:3]) > 0.1, errors


def test_paddleocr_vl_tower_grid_has_half_pixel_centres_and_a_misread_fails(tmp_path):
    """PaddleOCR-VL's embeddings resample bilinearly with align_corners=False; the same table with corners aligned
    (Qwen3-VL's) misses them at every grid but the trained one."""
    plan = read_model(zoo.tiny("paddleocr_vl_vision", tmp_path / "paddleocr"))
    role = plan.role("vision-pos-embed")
    assert (role.values["align_corners"], role.values["trained_h"]) == (False, 6)
    encoding, entry, rng = get_encoding("vit-learned"), plan.manifest_entry(role), np.random.default_rng(1)
    wrong = encoding.params(**{**role.values, "align_corners": True})
    session = oracle.session(Built(encoding, wrong, entry), entry)
    errors = [np.max(np.abs(session.run(feeds) - encoding.reference(wrong, feeds))) for feeds in feeds_for(encoding, wrong, rng)]
    assert errors[0] < 1e-6 and min(errors[1:3]) > 0.1
