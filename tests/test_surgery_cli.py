"""`posexport doctor`, `patch` and `model-parity` in-process (typer's runner), and `surgery.splice`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime as ort
import pytest
from typer.testing import CliRunner

from posexport import surgery
from posexport.errors import PosexportError
from posexport.rope.encoding import RopeParams, reference

from . import surgery_fixtures as sf

posexport_cli = pytest.importorskip("posexport_cli.main")


def cli(*args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(posexport_cli.app, [str(a) for a in args])
    return result.exit_code, result.output, result.exception


@pytest.fixture(scope="module")
def genai() -> tuple[Path, Path]:
    pytest.importorskip("onnxruntime_genai")
    folder = sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)
    return folder, sf.genai_export(folder)


def test_doctor_patch_and_model_parity_from_the_command_line(genai, tmp_path):
    folder, model = genai
    code, out, _ = cli("doctor", model, "--from-model", folder, "--json", tmp_path / "report.json", "--fail-on",
                       "--markdown", tmp_path / "report.md")
    # two site faults (limit, precision); the caches hold the 2048 rows the config promises: not the exporter's fault
    assert code == 1 and "position-limit" in out and "2 faults in 1 site" in out and "written by onnxruntime-genai" in out
    assert "exporter fault" not in out
    assert "| 1 | position-limit |" in (tmp_path / "report.md").read_text()
    report = json.loads((tmp_path / "report.json").read_text())
    assert [s["kind"] for s in report["sites"]] == ["rope-cache"]
    fixed = tmp_path / "fixed" / "model.onnx"
    fixed.parent.mkdir()
    code, out, error = cli("patch", model, "--out", fixed, "--from-model", folder, "--position-limit", "8192")
    assert code == 0, (out, error)
    assert '"scaling": "llama3"' in out and '"position_limit": 8192' in out
    assert cli("doctor", fixed, "--from-model", folder, "--fail-on")[0] == 0
    code, out, _ = cli("model-parity", "--model", fixed, "--against", model, "--prompt", "16", "--past", "3000",
                       "--runtimes", "ort-cpu", "--markdown", tmp_path / "parity.md")
    markdown = (tmp_path / "parity.md").read_text()
    assert "| model.onnx | 1 token(s) at position 3000 | logits | ort-cpu | the reference fails: " in markdown
    assert "cos_cache dimension 0 shall not be less than total_sequence_length" in markdown
    assert code == 0 and "5 outputs not compared" in out.splitlines()[-1]
    code, out, _ = cli("model-parity", "--model", fixed, "--against", model, "--prompt", "16", "--past", "3000",
                       "--runtimes", "ort-cpu", "--strict")
    last = " ".join(out.split()).rsplit("FAIL (--strict)", 1)[-1]
    assert code == 1 and "--strict fails on 0 unavailable runtimes, 5 outputs not compared" in last
    assert cli("model-parity", "--model", model, "--against", fixed, "--past", "3000", "--runtimes", "ort-cpu")[0] == 1
    # The same check spelled as `parity --model`.
    assert cli("parity", "--model", model, "--against", fixed, "--past", "3000", "--runtimes", "ort-cpu")[0] == 1
    # Patching the patched model again leaves one mark naming its own source.
    again = tmp_path / "again" / "model.onnx"
    again.parent.mkdir()
    assert cli("patch", fixed, "--out", again, "--from-model", folder, "--position-limit", "8192")[0] == 0
    marks = [(e.key, e.value) for e in onnx.load(str(again), load_external_data=False).metadata_props if e.key == "posexport.patched_from"]
    assert marks == [("posexport.patched_from", "model.onnx")]


def test_patch_errors_name_the_node_and_leave_nothing(genai, tmp_path):
    _, model = genai
    code, _, error = cli("patch", model, "--out", tmp_path / "x.onnx")
    assert code != 0 and isinstance(error, PosexportError) and "GroupQueryAttention node" in str(error)
    assert list(tmp_path.iterdir()) == []
    code, _, error = cli("patch", model, "--out", tmp_path / "x.onnx", "--from-model", tmp_path, "--preset", "llama-3.1-8b")
    assert isinstance(error, PosexportError) and "give one source" in str(error)


def block(dims: list) -> onnx.ModelProto:
    """A toy attention block: q = x, k = −x, and their sum, all graph outputs."""
    nodes = [oh.make_node("Identity", ["x"], ["q"]), oh.make_node("Neg", ["x"], ["k"]), oh.make_node("Add", ["q", "k"], ["s"])]
    graph = oh.make_graph(nodes, "mine", [oh.make_tensor_value_info("x", 1, dims), oh.make_tensor_value_info("position_ids", 7, dims[:2])],
                          [oh.make_tensor_value_info(n, 1, dims) for n in ("q", "k", "s")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10)


def test_splice_rotates_named_tensors_and_keeps_names_distinct():
    model = block(["batch", "seq", 8, 64])
    once = surgery.splice(model, at={"q": "q", "k": "k"}, position_ids="position_ids", head_dim=64, heads=8, base=500000.0)
    twice = surgery.splice(once, at={"s": "s"}, position_ids="position_ids", head_dim=64, heads=8, base=10000.0)
    onnx.checker.check_model(twice)
    assert {"Rope", "Rope_1"} <= {f.name for f in twice.functions}
    x = np.random.default_rng(0).standard_normal((2, 5, 8, 64)).astype(np.float32)
    positions = np.arange(1000, 1005)[None].repeat(2, 0)
    q, k, s = ort.InferenceSession(twice.SerializeToString()).run(None, {"x": x, "position_ids": positions})
    p, p2 = RopeParams(head_dim=64, heads=8, base=500000.0), RopeParams(head_dim=64, heads=8, base=10000.0)
    q_ref = reference(p, {"x": x, "position_ids": positions})
    assert np.abs(q - q_ref).max() < 1e-5 and np.abs(k + q_ref).max() < 1e-5
    # s = rope_10000(q + k) with q + k computed from the rotated q and k.
    assert np.abs(s - reference(p2, {"x": q + k, "position_ids": positions})).max() < 1e-5
    with pytest.raises(PosexportError, match="no node or graph input"):
        surgery.splice(model, at={"q": "nope"}, position_ids="position_ids", head_dim=64, heads=8)


def test_model_parity_shows_where_the_original_drifts():
    folder = sf.tiny_llama("torch-dynamic", "dynamic")
    model = sf.torch_export(sf.as_plain(folder))
    fixed = model.with_name("dyn-cli-fixed.onnx")
    assert cli("patch", model, "--out", fixed, "--from-model", folder)[0] == 0
    report = model.with_name("dyn-cli-report.json")
    code, out, error = cli("model-parity", "--model", fixed, "--against-hf", folder, "--original", model, "--prompt", "100",
                           "--runtimes", "ort-cpu", "--tolerance", "2e-5", "--outputs", "logits", "--json", report)
    assert code == 0 and out.strip().splitlines()[-1].startswith("PASS"), (out, error)
    (row,) = json.loads(report.read_text())["results"]
    assert row["output"] == "logits" and row["comparison"]["normalised"] <= 2e-5 < 1e-2 < float(row["original"])


@pytest.mark.parametrize("encoding", ["alibi", "t5"])
def test_splice_adds_an_attention_bias_before_the_softmax(encoding):
    from posexport import export
    from posexport.registry import get_encoding

    dims = ["batch", 4, "q_len", "k_len"]
    nodes = [oh.make_node("Identity", ["x"], ["scores"]), oh.make_node("Softmax", ["scores"], ["p"], axis=-1)]
    graph = oh.make_graph(nodes, "attention", [oh.make_tensor_value_info("x", 1, dims)], [oh.make_tensor_value_info("p", 1, dims)])
    model = surgery.splice(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10),
                           at={"scores": "scores"}, encoding=encoding, heads=4)
    x = np.random.default_rng(1).standard_normal((2, 4, 5, 7)).astype(np.float32)
    (p,) = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    biased = get_encoding(encoding).reference(export.build(encoding, {"heads": 4}).params, {"scores": x})
    expected = np.exp(biased - biased.max(-1, keepdims=True))
    assert np.abs(p - expected / expected.sum(-1, keepdims=True)).max() < 1e-6
