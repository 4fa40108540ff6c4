"""onnxruntime-genai's builder at low precision (``-e cpu``): a tiny plain-rope Llama (base 10000, head 16,
max_position_embeddings 256) built in fp16, bf16 and int4.

fp16 and bf16 store cos/sin caches in the model's float type (com.microsoft.RotaryEmbedding reads them in
it): the doctor measures them against float64 over every row, patch rebuilds them from float64 rounded
once to that type, and the patched fp16 model is judged against float64 transformers with the float16
bound. onnxruntime's CPU provider has no bfloat16 kernels: the bf16 model is doctored and patched, never
run. int4 keeps float32 caches (MatMulNBits weights): its quantised weights put it O(1) off float64
transformers, so it is held against itself with float64-exact caches written here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh
import pytest

from posexport import surgery
from posexport.verdicts import FeedCase, model_parity

from . import surgery_fixtures as sf

pytest.importorskip("onnxruntime_genai")
ROWS, LIMIT = 256, 1024


@pytest.fixture(scope="module")
def folder() -> Path:
    return sf.tiny_llama("genai-lowp", "default", max_positions=ROWS)


def exact_caches(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin of plain rope (base 10000, head 16) from float64 angles, written from the formula."""
    angles = np.arange(rows, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, 16, 2, dtype=np.float64) / 16)
    return np.cos(angles), np.sin(angles)


def caches(model: Path) -> dict[str, np.ndarray]:
    return {t.name: onh.to_array(t) for t in onnx.load(str(model)).graph.initializer if t.name in ("cos_cache", "sin_cache")}


def patched(folder: Path, precision: str) -> Path:
    out = sf.ROOT / f"genai-lowp-{precision}-patched" / "model.onnx"
    if not out.is_file():
        surgery.patch_file(sf.genai_export(folder, precision), out, surgery.requested_values(from_model=folder), LIMIT)
    return out


@pytest.mark.parametrize("precision, dtype", [("fp16", "float16"), ("bf16", "bfloat16")])
def test_low_precision_caches_are_a_fault_measured_against_float64(folder, precision, dtype):
    model = sf.genai_export(folder, precision)
    report = surgery.doctor(model, surgery.requested_values(from_model=folder), from_model=folder)
    (site,) = report["sites"]
    stored, (cos, sin) = caches(model), exact_caches(ROWS)
    measured = max(np.abs(stored["cos_cache"].astype(np.float64) - cos).max(), np.abs(stored["sin_cache"].astype(np.float64) - sin).max())
    faults = {f["fault"]: f for f in site["faults"]}
    assert site["recovered"]["dtype"] == dtype and faults["position-limit"]["value"] == ROWS
    assert faults[f"{dtype}-cache"]["value"] == pytest.approx(measured, rel=1e-12) and measured > 0.9 * sf.half_ulp(np.float64(0.9), dtype)
    (known,) = [f for f in report["exporter_faults"] if f["fault"] == f"{dtype}-cache"]
    assert known["this_exporter"] and known["value"] == pytest.approx(measured, rel=1e-12)


@pytest.mark.parametrize("precision, dtype", [("fp16", "float16"), ("bf16", "bfloat16")])
def test_patch_rebuilds_low_precision_caches_from_float64_rounded_once(folder, precision, dtype):
    fixed = patched(folder, precision)
    stored, exact = caches(fixed), exact_caches(LIMIT)
    for name, value in zip(("cos_cache", "sin_cache"), exact):
        assert str(stored[name].dtype) == dtype and stored[name].shape == (LIMIT, 8)
        assert np.all(np.abs(stored[name].astype(np.float64) - value) <= sf.half_ulp(value, dtype)), name
    (site,) = surgery.doctor(fixed, surgery.requested_values(from_model=folder))["sites"]
    assert [f["fault"] for f in site["faults"]] == [f"{dtype}-cache"]  # the op's own type; no limit, no excess rounding
    assert "these caches are that rounding" in site["faults"][0]["detail"]
    assert json.loads((fixed.parent / "genai_config.json").read_text())["model"]["context_length"] == LIMIT


def test_patched_float16_model_agrees_with_float64_transformers_past_the_old_limit(folder):
    model, fixed = sf.genai_export(folder, "fp16"), patched(folder, "fp16")
    cases = [FeedCase(16), FeedCase(600)]
    report = model_parity(fixed, against_hf=folder, cases=cases, runtimes=["ort-cpu"], original=model)
    assert report.passed and len(report.results) == 10 and not report.not_compared, report  # logits, every key and value
    assert report.results[5].comparison.bound == pytest.approx(4 * 2.0 ** -11 * np.sqrt(600))  # the float16 bound
    assert report.results[5].original.startswith("fails:")  # the original stops at 256 rows
    # No decode step: the builder's fp16 graph declares repeat_kv's past + new tokens as sequence_length, and
    # onnxruntime's buffer reuse then fails on any call with past key/values, patched or not (docs/surgery.md).
    unpatched = model_parity(model, against_hf=folder, cases=[FeedCase(600)], runtimes=["ort-cpu"])
    assert not unpatched.passed and unpatched.results[0].status == "error"


def test_the_float16_bound_catches_a_rope_five_percent_off(folder, tmp_path):
    other = tmp_path / "base-10500"
    shutil.copytree(folder, other)
    config = json.loads((other / "config.json").read_text())
    config["rope_parameters"]["rope_theta"] = 10500.0
    (other / "config.json").write_text(json.dumps(config))
    report = model_parity(patched(folder, "fp16"), against_hf=other, cases=[FeedCase(600)], runtimes=["ort-cpu"], outputs=["present.*.key"])
    assert not report.passed and min(r.comparison.normalised for r in report.results) > 10 * report.results[0].comparison.bound


def test_onnxruntime_cpu_cannot_run_the_bfloat16_model_so_nothing_is_compared(folder):
    report = model_parity(patched(folder, "bf16"), against_hf=folder, cases=[FeedCase(16)], runtimes=["ort-cpu"])
    assert not report.passed and not report.results and "NOT_IMPLEMENTED" in report.unavailable["ort-cpu"]


def test_int4_caches_are_rebuilt_exactly_and_run_past_the_limit(folder, tmp_path):
    model, fixed = sf.genai_export(folder, "int4"), patched(folder, "int4")
    assert caches(fixed)["cos_cache"].dtype == np.float32
    reference = sf.with_caches(model, *exact_caches(LIMIT), tmp_path / "exact.onnx")
    report = model_parity(fixed, reference, cases=[FeedCase(16), FeedCase(600)], runtimes=["ort-cpu"], tolerance=1e-6)
    assert report.passed and len(report.results) == 10, report
    original = model_parity(model, reference, cases=[FeedCase(600)], runtimes=["ort-cpu"])
    assert not original.passed and "cos_cache dimension 0" in original.results[0].message
