"""Wrappers read through their text_config's own type: Florence-2's BART tables read as BART's."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import learned, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402

import zoo  # noqa: E402


def test_florence2_reads_its_bart_tables_as_bart(tmp_path):
    """Florence-2's language model is transformers' BartModel: the reader finds each part's table under the
    name Florence-2's own model gives it (built on the meta device), and reads them exactly as a BART folder
    holding the same tables (which test_encoder_decoder_tables_add_the_rows_transformers_adds checks)."""
    import torch
    from transformers import AutoConfig
    from transformers.models.bart.modeling_bart import BartModel
    from transformers.models.florence2.modeling_florence2 import Florence2ForConditionalGeneration

    folder = zoo.tiny("florence2", tmp_path / "florence2")
    with torch.device("meta"):
        model = Florence2ForConditionalGeneration(AutoConfig.from_pretrained(folder))
    assert isinstance(model.model.language_model, BartModel)
    names, rng = model.state_dict(), np.random.default_rng(0)
    rows = model.config.text_config.max_position_embeddings + 2
    tables = {next(k for k in learned.table_keys(part) if k in names): rng.standard_normal((rows, 64)).astype(np.float32)
              for part in ("encoder", "decoder")}
    save_file(tables, str(folder / "model.safetensors"))
    bart = zoo.tiny("bart", tmp_path / "bart", max_position_embeddings=rows - 2)
    save_file({k.removeprefix("model.language_model."): v for k, v in tables.items()}, str(bart / "model.safetensors"))
    plan, theirs = read_model(folder), read_model(bart).roles
    assert [r.role for r in plan.roles] == ["learned-encoder", "learned-decoder"]
    for mine, barts in zip(plan.roles, theirs):
        assert recipe_problem(plan.manifest_entry(mine)) == ""  # the hf runtime accepts the recipe
        assert {**mine.values, "weights": "", "key": ""} == {**barts.values, "weights": "", "key": ""}
        assert mine.values["key"] == f"model.language_model.{barts.values['key']}" and mine.hf.text_config
