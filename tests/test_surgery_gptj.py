"""GPT-J's sin|cos table patched: a tiny GPT-J (weights std 0.3, rope on 8 of 16 channels, interleaved pairs,
n_positions 64) exported by torch.onnx's TorchScript exporter with its key/value caches (Gather) and by
its dynamo exporter (GatherND), its table rebuilt from float64 to 256 rows, then run past the old limit
against float64 transformers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh
import pytest

from posexport import surgery
from posexport.errors import PosexportError
from posexport.verdicts import FeedCase, model_parity

from . import surgery_fixtures as sf

pytest.importorskip("transformers")
ROWS, LIMIT = 64, 256
TABLE = "/m/transformer/rotary_emb/Constant_output_0"  # the TorchScript exporter's Constant holding embed_positions
# Below the old limit the patched model differs from the export by its table alone: transformers' float32
# angles (2.9e-7 off float64) against float64 rounded once (≤ 3e-8). Both models' own float32
# arithmetic is the same; the difference that reaches the outputs stays within a few float32 roundings of
# them: 1e-6, ten times what is measured (1.9e-7 keys, 4.1e-7 logits), a hundred times below a wrong table.
BELOW_LIMIT = 1e-6


@pytest.fixture(scope="module")
def gptj() -> tuple[Path, Path]:
    folder = sf.tiny_gptj()
    return folder, sf.torch_export_with_cache(folder)


@pytest.fixture(scope="module")
def patched(gptj, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gptj-patched") / "model.onnx"
    surgery.patch_file(gptj[1], out, None, LIMIT)  # the recognised rope: plain, base 10000, 8 channels
    return out


def sin_cos_table(rows: int, base: float = 10000.0) -> np.ndarray:
    """GPT-J's sin | cos table (8 channels) from float64 angles, written from the formula."""
    angles = np.arange(rows, dtype=np.float64)[:, None] * base ** (-np.arange(0, 8, 2, dtype=np.float64) / 8)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def table_in(model: Path) -> np.ndarray:
    (node,) = [n for n in onnx.load(str(model)).graph.node if n.output[0] == TABLE]
    return onh.to_array(node.attribute[0].t)


def with_table(model: Path, table: np.ndarray, out: Path) -> Path:
    """A copy of ``model`` whose sin|cos Constant holds ``table`` (float32), written here without posexport."""
    copy = onnx.load(str(model))
    (node,) = [n for n in copy.graph.node if n.output[0] == TABLE]
    node.attribute[0].t.CopyFrom(onh.from_array(table.astype(np.float32)))
    onnx.save(copy, str(out))
    return out


def test_the_table_is_rebuilt_from_float64_rounded_once(gptj, patched, tmp_path):
    table = table_in(patched)
    exact = sin_cos_table(LIMIT)
    assert table.dtype == np.float32 and table.shape == (LIMIT, 8)
    assert np.all(np.abs(table.astype(np.float64) - exact) <= sf.half_ulp(exact, "float32"))
    report = surgery.doctor(patched)
    assert report["faults"] == 0 and report["sites"][0]["notes"][0] == f"position limit {LIMIT} (chosen with posexport patch)"
    again = tmp_path / "model.onnx"
    surgery.patch_file(gptj[1], again, None, LIMIT)
    assert again.read_bytes() == patched.read_bytes()


def test_below_the_old_limit_the_outputs_are_the_exports_within_float32_rounding(gptj, patched):
    folder, model = gptj
    assert np.abs(table_in(model).astype(np.float64) - sin_cos_table(ROWS)).max() <= 3e-7  # transformers' float32 angles
    report = model_parity(patched, model, cases=[FeedCase(16), FeedCase(ROWS)], runtimes=["ort-cpu"], tolerance=BELOW_LIMIT)
    assert report.passed and len(report.results) == 10, report  # logits and every key and value


def test_past_the_old_limit_it_agrees_with_float64_transformers(gptj, patched):
    folder, model = gptj
    report = model_parity(patched, against_hf=folder, cases=[FeedCase(16), FeedCase(200)], runtimes=["ort-cpu"], original=model)
    assert report.passed and len(report.results) == 10 and not report.not_compared, report
    assert max(r.comparison.normalised for r in report.results) <= 1e-5  # float32 model against float64 (default bound 1e-4)
    assert all(r.original.startswith("fails: indices element out of data bounds") for r in report.results[5:])


def test_a_wrong_table_fails_against_float64_transformers(gptj, patched, tmp_path):
    folder, model = gptj
    wrong = with_table(patched, sin_cos_table(LIMIT, base=10500.0), tmp_path / "wrong.onnx")
    report = model_parity(wrong, against_hf=folder, cases=[FeedCase(200)], runtimes=["ort-cpu"], outputs=["present.*.key"])
    assert not report.passed and min(r.comparison.normalised for r in report.results) > 1e-2


def test_parameters_that_do_not_give_the_table_are_refused_and_nothing_is_written(gptj, tmp_path):
    with pytest.raises(PosexportError, match="Gather node '/m/transformer/rotary_emb/Gather': the table holds frequencies"):
        surgery.patch_file(gptj[1], tmp_path / "out.onnx", {"base": 20000.0}, LIMIT)
    with pytest.raises(PosexportError, match="cannot follow the dynamic scaling"):
        surgery.patch_file(gptj[1], tmp_path / "out.onnx", {"base": 10000.0, "scaling": "dynamic", "factor": 2.0}, LIMIT)
    assert list(tmp_path.iterdir()) == []


def test_a_table_repeated_per_batch_and_read_with_gatherelements_is_rebuilt_in_its_shape():
    ort = pytest.importorskip("onnxruntime")
    model = sf.sincos_gatherelements(40, 500000.0)  # transformers 4.x's GPT-J form, 40 rows
    fixed = surgery.patch(model, position_limit=100).model
    (table,) = [onh.to_array(t) for t in fixed.graph.initializer if t.name == "table"]
    assert table.shape == (1, 100, 8)
    positions = np.array([[0, 39, 40, 99]])
    got = ort.InferenceSession(fixed.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"position_ids": positions})[0]
    exact = sin_cos_table(100, base=500000.0)[positions[0]]
    assert np.all(np.abs(got[0] - exact) <= sf.half_ulp(exact, "float32"))
    with pytest.raises(Exception, match="Out of range value in index"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"position_ids": positions})


def test_the_dynamo_export_reads_the_table_with_gathernd_and_is_patched_the_same_way(gptj, tmp_path):
    folder = gptj[0]
    model = sf.torch_export(folder)  # torch.onnx dynamo: GatherND(table, Unsqueeze(position_ids, -1)); logits only
    (site,) = surgery.find(model)
    assert site.kind == "sincos-table" and site.recovered["op"] == "GatherND" and site.recovered["rows"] == ROWS
    out = tmp_path / "model.onnx"
    surgery.patch_file(model, out, None, LIMIT)
    report = model_parity(out, against_hf=folder, cases=[FeedCase(16), FeedCase(200)], runtimes=["ort-cpu"], original=model)
    assert report.passed and max(r.comparison.normalised for r in report.results) <= 1e-5, report
    assert report.results[1].original.startswith("fails: invalid index")


def test_a_table_another_node_reads_is_refused():
    import onnx.helper as oh

    model = sf.sincos_gatherelements(40, 500000.0)
    model.graph.node.append(oh.make_node("Identity", ["table"], ["also"], name="reader"))
    model.graph.output.append(oh.make_tensor_value_info("also", onnx.TensorProto.FLOAT, None))
    with pytest.raises(PosexportError, match="its table is also read by Identity node 'reader'"):
        surgery.patch(model, position_limit=100)
