"""NaViT towers: each fraction form passing against the tower, the other failing; a patch larger than the image
refused."""

from __future__ import annotations


import pytest

pytest.importorskip("transformers")

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import navit, read_model  # noqa: E402

import zoo  # noqa: E402
from ..harness import built_graph_passes_parity_from_model, misread_statuses  # noqa: E402


@pytest.mark.parametrize("model_type", sorted(navit.FAMILIES))
def test_navit_towers_pass_parity_from_model_and_the_other_fractions_fail(tmp_path, model_type):
    """A tiny tower of its own config (a 23 × 23 grid) with a random table: its graph built as a user builds it passes
    `parity --from-model` against the tower's own embeddings forward (bit for bit against the graph: one row a patch);
    built with the other code path's fractions it fails at the trained grid, where the two bucket differently (MiniCPM-V's
    i/h skip a row there), and still agrees at one patch."""
    import importlib


    tower = navit.FAMILIES[model_type]
    folder = zoo.tiny(model_type, tmp_path / model_type)
    embeddings = getattr(importlib.import_module(f"transformers.models.{tower.module}"), tower.embeddings)(
        zoo.config_class(model_type).from_pretrained(folder))
    zoo.table_checkpoint(folder, "embeddings.position_embedding.weight", tuple(embeddings.position_embedding.weight.shape))
    report = built_graph_passes_parity_from_model(folder, tmp_path)
    assert all(r.comparison.max_abs == 0 for r in report.pairwise if r.runtime == "hf vs ort-cpu"), report.pairwise
    (role,) = read_model(folder).roles
    assert (role.values["trained_h"], role.values["bucket_fractions"]) == (23, tower.fractions)
    other = next(f for f in ("reciprocal", "quotient") if f != tower.fractions)
    statuses, _ = misread_statuses(folder, tmp_path, {**role.values, "bucket_fractions": other})
    assert statuses["trained23x23-b2"] == "fail" and statuses["grid1x1-b2"] == "pass", statuses


def test_navit_tower_with_a_patch_larger_than_its_image_is_refused_in_one_line(tmp_path):
    folder = zoo.tiny("idefics2_vision", tmp_path / "idefics2", image_size=16, patch_size=32)
    with pytest.raises(PosexportError, match="'patch_size' = 32: larger than image_size") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)
