"""Pix2Struct and Kosmos-2.5: the patch-coordinate tables the towers add, and the text decoder's causal T5 bias."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import read_model  # noqa: E402
from posexport.models.cli import build as cli_build  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import processor_patches, bias_roles_agree_with_hf  # noqa: E402


# model_type -> the tower's own model class (in transformers.models.<module>.modeling_<module>)
PATCH_TOWERS = {"pix2struct_vision_model": ("pix2struct", "Pix2StructVisionModel"),
                "kosmos_2_5_vision_model": ("kosmos2_5", "Kosmos2_5VisionModel")}


def patch_tower_folder(model_type: str, folder: Path) -> Path:
    """A tiny Pix2Struct-style tower of its own config, its random row and column tables in a checkpoint of the tower."""
    zoo.tiny(model_type, folder)
    config = zoo.config_class(model_type).from_pretrained(folder)
    rng = np.random.default_rng(0)
    rows = getattr(config, "seq_len", getattr(config, "max_num_patches", None))
    save_file({f"embeddings.{axis}_embedder.weight": rng.standard_normal((rows, config.hidden_size)).astype(np.float32)
               for axis in ("row", "column")}, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize("model_type", sorted(PATCH_TOWERS))
def test_patch_coordinate_tables_are_the_rows_the_tower_adds(tmp_path, model_type):
    """The tower's own embeddings forward (read from the checkpoint) on a processor's 5 × 7 patches and 3 padding
    patches: its output is the patch projection plus the row role's rows at column 0's ids plus the column role's at
    column 1's, the float64 references chained; the ids swapped between the roles, or read 0-based, miss it."""
    import importlib

    import torch

    folder = patch_tower_folder(model_type, tmp_path / model_type)
    module, name = PATCH_TOWERS[model_type]
    model_class = getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), name)
    model = model_class.from_pretrained(folder).eval()
    flattened = processor_patches(model.config, 5, 7, 3, np.random.default_rng(1))
    with torch.no_grad():
        theirs = model.embeddings(torch.from_numpy(flattened)).double().numpy()
        projected = model.embeddings.patch_projection(torch.from_numpy(flattened[..., 2:])).double().numpy()
    plan = read_model(folder)
    assert [(r.role, r.encoding, r.values["max_positions"]) for r in plan.roles] == [
        ("row-learned", "learned", 40), ("column-learned", "learned", 40)]
    encoding = get_encoding("learned")
    row, column = (encoding.params(**r.values) for r in plan.roles)
    ids = flattened[..., :2].astype(np.int64)

    def error(row_ids, column_ids):
        ours = encoding.reference(row, {"x": projected, "position_ids": row_ids})
        ours = encoding.reference(column, {"x": ours, "position_ids": column_ids})
        return np.max(np.abs(ours - theirs))

    assert error(ids[..., 0], ids[..., 1]) < 1e-5
    assert error(ids[..., 1], ids[..., 0]) > 0.1 and error(np.maximum(ids[..., 0] - 1, 0), ids[..., 1]) > 0.1


@pytest.mark.parametrize("model_type", sorted(PATCH_TOWERS))
def test_patch_coordinate_tables_pass_parity_from_model_and_misreads_fail(tmp_path, model_type):
    """Both graphs built as a user builds them pass `parity --from-model` against the tower's own embeddings forward
    (hf patch-coordinates session); the row graph built from the column table, and one reading the ids 0-based (row
    0 left out), fail it in every case."""
    from posexport import export

    folder = patch_tower_folder(model_type, tmp_path / model_type)
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    graphs = sorted((tmp_path / "built").glob("*.onnx"))
    assert [g.name for g in graphs] == [f"{model_type}-column-learned.onnx", f"{model_type}-row-learned.onnx"]
    for graph in graphs:
        report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), bad
    plan = read_model(folder)
    row, column = plan.roles
    entry = plan.manifest_entry(row)
    assert "not one of row, column" in recipe_problem({**entry, "hf": {**entry["hf"], "axis": "diagonal"}})
    for values, name in (({**row.values, "key": column.values["key"]}, "swapped"),
                         ({**row.values, "max_positions": None, "row_offset": 1}, "zero-based")):
        art = export.build("learned", values, backend="portable")
        art.manifest["model"] = entry
        wrong, _ = export.save(art, tmp_path, name)
        report = run_model_parity(folder, wrong, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
        hf = [r for r in report.results if r.runtime == "hf"]
        assert hf and all(r.status == "fail" and r.comparison.normalised > 100 * r.comparison.bound for r in hf), name


def test_patch_coordinate_tables_of_no_rows_are_refused_in_one_line(tmp_path):
    folder = patch_tower_folder("pix2struct_vision_model", tmp_path / "pix2struct")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "seq_len": 0}))
    with pytest.raises(PosexportError, match="'seq_len' = 0: expected a positive integer") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("buckets, distance", [(32, 128), (16, 40)])
def test_pix2struct_text_buckets_are_t5s_causal_on_every_offset(buckets, distance):
    """Pix2StructTextAttention._relative_position_bucket, causal as its compute_bias calls it, against the t5
    encoding's float64 buckets on every relative position in ±200000: equal; the bidirectional buckets differ."""
    import torch
    from transformers.models.pix2struct.modeling_pix2struct import Pix2StructTextAttention

    from posexport.encodings.t5 import relative_bucket

    offsets = np.arange(-200000, 200001)
    model = Pix2StructTextAttention._relative_position_bucket(torch.from_numpy(offsets), False, buckets, distance).numpy()
    assert np.array_equal(relative_bucket(offsets, False, buckets, distance), model)
    assert np.mean(relative_bucket(offsets, True, buckets, distance) != model) > 0.4


def pix2struct_text_folder(folder: Path) -> Path:
    """A tiny Pix2StructTextModel of its own config, its random layer-0 bias table in a checkpoint of the model."""
    from posexport.models.pix2struct import TEXT_TABLE

    # Pix2StructTextConfig has no initializer_range of its own (Pix2StructConfig sets it on its text_config), and
    # Pix2StructTextModel's weight init reads it: a standalone folder says it.
    zoo.tiny("pix2struct_text_model", folder, initializer_range=0.02)
    save_file({TEXT_TABLE: np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)},
              str(folder / "model.safetensors"))
    return folder


def test_pix2struct_text_bias_is_the_one_every_layer_adds(tmp_path):
    """Pix2StructTextModel with the checkpoint's table, on a forward of 9 tokens: every layer hands on the same bias
    (layer 0's), the t5 graph's causal reference on random scores, a bidirectional reading missing it."""
    import torch
    from transformers import Pix2StructTextModel

    folder = pix2struct_text_folder(tmp_path / "pix2struct_text")
    model = Pix2StructTextModel.from_pretrained(folder).eval()
    biases = []
    for layer in model.layer:
        layer.register_forward_hook(lambda _m, _a, out: biases.append(out[1][0].double().numpy()))
    with torch.no_grad():
        model(input_ids=torch.tensor([[5, 9, 12, 7, 30, 2, 11, 3, 8]]))
    plan = read_model(folder)
    assert [(r.role, r.encoding, r.layers) for r in plan.roles] == [("t5-decoder", "t5", (0, 1))]
    assert len(biases) == 2 and np.array_equal(biases[0], biases[1])
    (bias,) = plan.roles
    t5, scores = get_encoding("t5"), np.random.default_rng(1).standard_normal((1, 4, 9, 9))

    def bias_error(values):
        return np.max(np.abs(t5.reference(t5.params(**values), {"scores": scores}) - (scores + biases[0])))

    assert bias_error(bias.values) < 1e-6 and bias_error({**bias.values, "bidirectional": True}) > 0.1
    bias_roles_agree_with_hf(plan, np.random.default_rng(2), (2, 4, 300, 300))  # past max_distance too


def test_pix2struct_text_passes_parity_from_model_and_bidirectional_buckets_fail(tmp_path):
    """The graph built as a user builds it passes `parity --from-model` against Pix2StructTextAttention's own
    compute_bias (hf t5 session), over keys past max_distance too; built bidirectional, it fails in every case."""
    from posexport import export

    folder = pix2struct_text_folder(tmp_path / "pix2struct_text")
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    (graph,) = sorted((tmp_path / "built").glob("*.onnx"))
    report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17, 300), batches=(2,), properties=False)
    bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
    assert not bad and any(r.runtime == "hf" for r in report.results), bad
    (bias,) = read_model(folder).roles
    wrong, _ = export.save(export.build("t5", {**bias.values, "bidirectional": True}, backend="portable"), tmp_path, "both")
    report = run_model_parity(folder, wrong, ["ort-cpu"], seqs=(17, 300), batches=(2,), properties=False)
    hf = [r for r in report.results if r.runtime == "hf"]
    assert hf and all(r.status == "fail" and r.comparison.normalised > 100 * r.comparison.bound for r in hf)
