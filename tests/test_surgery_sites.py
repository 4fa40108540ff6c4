"""Doctor on sites that are found and measured, not patched: ALiBi with non-standard slopes (reported with
the standard ones), GPT-J's sin|cos table (its position limit and frequencies), Whisper's decoder table,
ViT's grid resampled per call (checked against float64 at other grids)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper as onh
import pytest

from posexport import surgery
from posexport.encodings.alibi import alibi_slopes

from . import learned_fixtures as lf
from . import surgery_fixtures as sf

pytest.importorskip("transformers")


def test_alibi_slopes_off_the_standard_sequence_are_reported_with_the_standard_ones():
    model = onnx.load(str(sf.torch_export(sf.tiny_bloom(), position_ids=False, dynamo=False)))
    (site,) = surgery.find(model)
    mul = next(n for n in model.graph.node if f"{n.op_type} node {n.name!r}" == site.anchor)
    constants = {n.output[0]: n.attribute[0].t for n in model.graph.node if n.op_type == "Constant"}
    constants |= {t.name: t for t in model.graph.initializer}
    slopes = next(constants[i] for i in mul.input if i in constants)
    assert np.allclose(onh.to_array(slopes).reshape(-1), alibi_slopes(4), rtol=1e-6)
    assert surgery.diagnose(model)["faults"] == 0  # BLOOM's own slopes: standard
    odd = onh.to_array(slopes).copy()
    odd.reshape(-1)[3] *= 0.5  # head 3 at half its slope
    slopes.CopyFrom(onh.from_array(odd, slopes.name))
    (report,) = surgery.diagnose(model)["sites"]
    (fault,) = report["faults"]
    standard = alibi_slopes(4)
    assert fault["fault"] == "alibi-slopes" and fault["value"] == pytest.approx(0.5, rel=1e-6)
    assert report["recovered"]["standard"] == ", ".join(f"{s:.6g}" for s in standard)
    assert f"head 3: {standard[3] / 2:.6g}, standard {standard[3]:.6g}" in fault["detail"]


def test_gptj_sincos_table_is_found_with_its_limit_and_frequencies():
    (site,) = surgery.doctor(lf.export("gptj"))["sites"]
    assert site["kind"] == "sincos-table" and site["recovered"]["rows"] == lf.LIMIT and site["recovered"]["rotary_dim"] == 8
    assert site["recovered"]["recognised"] == {"head_dim": 8, "base": 10000.0}  # GPT-J's base, read back from the table
    assert [(f["fault"], f["value"]) for f in site["faults"]] == [("position-limit", lf.LIMIT)]
    error = float(site["notes"][0].split(": ")[1].split(" ")[0])
    assert error < 3e-7  # float32 rounding of sin/cos at row 31 (transformers forms them from float32 angles)


def test_gptj_limit_is_where_onnxruntime_raises():
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(lf.export("gptj")), providers=["CPUExecutionProvider"])
    session.run(None, lf.feeds(lf.export("gptj"), lf.LIMIT))
    with pytest.raises(Exception, match="Gather"):
        session.run(None, lf.feeds(lf.export("gptj"), lf.LIMIT + 1))


def test_a_learned_table_is_not_taken_for_a_sincos_table():
    assert [s.kind for s in surgery.find(lf.export("gpt2"))] == ["learned-table"]
    assert [s.kind for s in surgery.find(lf.whisper_decoder())] == ["learned-table"]


def test_vit_interpolate_pos_encoding_resample_is_checked_against_float64_at_other_grids():
    model = onnx.load(str(lf.vit_interpolating()))
    (site,) = surgery.diagnose(model)["sites"]
    assert site["kind"] == "grid-resample" and site["recovered"]["trained_grid"] == "4×4" and site["recovered"]["dim"] == 32
    errors = site["recovered"]["resample_error"]
    assert errors["4×4"] == 0.0 and set(errors) == {"4×4", "5×5", "5×7", "8×7", "3×4"}
    assert max(errors.values()) < 1e-6 and site["faults"] == []  # float32 rounding of torch's bicubic
    resize = next(n for n in model.graph.node if n.op_type == "Resize")
    next(a for a in resize.attribute if a.name == "cubic_coeff_a").f = -0.5  # PIL's coefficient, not torch's
    (wrong,) = surgery.diagnose(model)["sites"]
    assert [f["fault"] for f in wrong["faults"]] == ["grid-resample"] and wrong["faults"][0]["value"] > 1e-3


def test_vit_export_agrees_with_transformers_at_another_grid():
    import torch

    ort = pytest.importorskip("onnxruntime")
    model = lf.vit_model()  # the fixture's weights
    pixels = np.random.default_rng(0).standard_normal((1, 3, 40, 56)).astype(np.float32)  # a 5×7 grid
    with torch.no_grad():
        ref = model(pixel_values=torch.from_numpy(pixels), interpolate_pos_encoding=True).last_hidden_state.numpy()
    out = ort.InferenceSession(str(lf.vit_interpolating()), providers=["CPUExecutionProvider"]).run(None, {"pixel_values": pixels})[0]
    assert out.shape == (1, 36, 32) and np.max(np.abs(out - ref)) < 1e-5


def test_a_sincos_table_repeated_per_batch_and_read_with_gatherelements_is_found():
    (site,) = surgery.diagnose(sf.sincos_gatherelements(40, 500000.0))["sites"]
    assert site["kind"] == "sincos-table" and site["recovered"]["op"] == "GatherElements" and site["recovered"]["rows"] == 40
    assert site["recovered"]["recognised"] == {"head_dim": 8, "base": 500000.0}
    assert [f["fault"] for f in site["faults"]] == ["position-limit"]
