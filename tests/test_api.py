"""The public API: `import posexport` gives one call per command, light until used."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import posexport

from . import surgery_fixtures as sf
from .harness import normalised_error


def test_every_public_name_resolves_and_the_import_stays_light():
    for name in posexport.__all__:
        assert getattr(posexport, name) is not None
    code = "import sys, posexport; print(','.join(m for m in ('torch', 'onnxscript', 'onnxruntime') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == ""
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        posexport.nope  # noqa: B018


def test_build_save_and_parity_of_a_path(tmp_path):
    art = posexport.build("rope", {"head_dim": 16, "heads": 2, "base": 500000.0})
    graph, _ = posexport.save(art, tmp_path, "rope16")
    report = posexport.parity(graph, ["ort-cpu"], seqs=(9,), batches=(1,))
    assert isinstance(report, posexport.Report) and report.passed
    # Against the float64 reference written here from the formulas, at positions far past the tables.
    x = np.random.default_rng(0).standard_normal((1, 3, 2, 16)).astype(np.float32)
    positions = np.array([[70000, 70001, 99999]])
    angles = positions[..., None, None] * 500000.0 ** (-np.arange(0, 16, 2) / 16)
    a, b = x[..., :8].astype(np.float64), x[..., 8:].astype(np.float64)
    exact = np.concatenate([a * np.cos(angles) - b * np.sin(angles), b * np.cos(angles) + a * np.sin(angles)], -1)
    out = posexport.load(graph).encoding  # the manifest says what the graph is
    assert out.name == "rope"
    import onnxruntime as ort

    (y,) = ort.InferenceSession(str(graph)).run(None, {"x": x, "position_ids": positions})
    assert normalised_error(y, exact) < 1e-6 * (np.log2(99999) + 1)


def test_doctor_patch_and_model_parity_of_an_export(tmp_path):
    pytest.importorskip("transformers")
    folder = sf.tiny_llama("torch-default", "default")
    model = sf.torch_export(folder)
    found = posexport.doctor(model, from_model=folder)
    assert [f["fault"] for f in found["sites"][0]["faults"]] == ["trig-per-call"]
    done = posexport.patch(model, tmp_path / "fixed" / "model.onnx", from_model=folder)
    assert isinstance(done, posexport.Patched)
    report = posexport.model_parity(tmp_path / "fixed" / "model.onnx", against_hf=folder, runtimes=["ort-cpu"],
                                    cases=[posexport.FeedCase(16), posexport.FeedCase(100)], tolerance=2e-5)
    assert report.passed and {r.output for r in report.results} == {"logits"}
