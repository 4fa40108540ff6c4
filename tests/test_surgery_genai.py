"""Model surgery on onnxruntime-genai's builder output: a Llama-3 (llama3 scaling, max_position_embeddings
2048) whose GroupQueryAttention reads float32 cos/sin caches of 2048 rows.

The builder's own logits are not held against transformers (onnxruntime-genai 0.18 with transformers 5.x
can wire lm_head to the wrong norm in tiny models); the patched model is held against the same ONNX model
with float64-exact caches, written here without posexport's scalings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh
import pytest

from posexport import surgery
from posexport.errors import PosexportError
from posexport.verdicts import FeedCase, model_parity

from . import surgery_fixtures as sf
from .harness import normalised_error

pytest.importorskip("onnxruntime_genai")
LIMIT = 8192


@pytest.fixture(scope="module")
def llama3() -> tuple[Path, Path]:
    folder = sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)
    return folder, sf.genai_export(folder)


@pytest.fixture(scope="module")
def patched(llama3, tmp_path_factory) -> Path:
    folder, model = llama3
    out = tmp_path_factory.mktemp("patched") / "model.onnx"
    surgery.patch_file(model, out, surgery.requested_values(from_model=folder), LIMIT)
    return out


def exact_caches(folder: Path, rows: int) -> tuple[np.ndarray, np.ndarray]:
    inv_freq = sf.llama3_inv_freq(json.loads((folder / "config.json").read_text()))
    angles = np.arange(rows, dtype=np.float64)[:, None] * inv_freq
    return np.cos(angles), np.sin(angles)


@pytest.fixture(scope="module")
def exact(llama3, tmp_path_factory) -> Path:
    """The builder's model with its caches replaced, here, by float64-exact ones of LIMIT rows."""
    folder, model = llama3
    return sf.with_caches(model, *exact_caches(folder, LIMIT), tmp_path_factory.mktemp("exact") / "exact.onnx")


def test_doctor_reports_the_limit_and_the_measured_cache_error(llama3):
    folder, model = llama3
    report = surgery.doctor(model, surgery.requested_values(from_model=folder))
    (site,) = report["sites"]
    assert site["kind"] == "rope-cache" and site["recovered"]["rows"] == 2048 and site["recovered"]["rotary_dim"] == 16
    assert len(site["feeds"]) == 2  # both layers' GroupQueryAttention
    faults = {f["fault"]: f for f in site["faults"]}
    assert faults["position-limit"]["value"] == 2048 and "2047" in faults["position-limit"]["detail"]
    cos, sin = exact_caches(folder, 2048)
    stored = onnx.load(str(model))
    tables = {t.name: onh.to_array(t) for t in stored.graph.initializer}
    measured = max(np.abs(tables["cos_cache"][-1] - cos[-1]).max(), np.abs(tables["sin_cache"][-1] - sin[-1]).max())
    assert faults["precision"]["value"] == pytest.approx(measured, rel=1e-6) and measured > 1e-6
    assert report["genai_context_length"] == 2048


def test_doctor_without_parameters_still_finds_the_limit(llama3):
    report = surgery.doctor(llama3[1])
    (site,) = report["sites"]
    assert site["recovered"]["recognised"] is None  # llama3 bands are not guessed from the cache
    assert [f["fault"] for f in site["faults"]] == ["position-limit"]


def test_patched_model_runs_past_the_old_limit_and_matches_exact_caches(llama3, patched, exact):
    folder, model = llama3
    cos, sin = exact_caches(folder, LIMIT)
    fixed = onnx.load(str(patched))
    tables = {t.name: onh.to_array(t) for t in fixed.graph.initializer}
    assert tables["cos_cache"].shape == (LIMIT, 8)
    assert max(np.abs(tables["cos_cache"] - cos).max(), np.abs(tables["sin_cache"] - sin).max()) <= 2e-7
    cases = [FeedCase(3000), FeedCase(1, 5000)]  # the decode step reads 5000 seeded past key/values
    report = model_parity(patched, exact, cases=cases, runtimes=["ort-cpu"], tolerance=2e-5)
    assert report.passed and not report.not_compared, report  # logits and every present key and value
    original = model_parity(model, exact, cases=[FeedCase(1, 5000)], runtimes=["ort-cpu"])
    assert not original.passed and "cos_cache" in original.results[0].message
    config = json.loads((patched.parent / "genai_config.json").read_text())
    assert config["model"]["context_length"] == LIMIT and config["model"]["decoder"]["filename"] == "model.onnx"
    assert (patched.parent / "tokenizer.json").is_file()


def chained_decode(model: Path, prompt: int) -> list[np.ndarray]:
    """Logits of a prompt of ``prompt`` tokens, then of one token decoded on the prompt's own key/values."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    ids = np.random.default_rng(7).integers(0, sf.VOCAB, size=(1, prompt + 1))
    empty = np.zeros((1, 2, 0, 16), dtype=np.float32)
    feeds = {"input_ids": ids[:, :prompt], "attention_mask": np.ones((1, prompt), dtype=np.int64)}
    feeds |= {f"past_key_values.{i}.{kv}": empty for i in range(2) for kv in ("key", "value")}
    first = dict(zip(names, session.run(names, feeds)))
    feeds = {"input_ids": ids[:, prompt:], "attention_mask": np.ones((1, prompt + 1), dtype=np.int64)}
    feeds |= {f"past_key_values.{i}.{kv}": first[f"present.{i}.{kv}"] for i in range(2) for kv in ("key", "value")}
    return [first["logits"], session.run(["logits"], feeds)[0]]


def test_a_5000_token_prompt_then_decoding_at_position_5000(llama3, patched, exact):
    for got, expected in zip(chained_decode(patched, 5000), chained_decode(exact, 5000)):
        assert normalised_error(got, expected) <= 2e-5
    with pytest.raises(Exception, match="cos_cache dimension 0"):
        chained_decode(llama3[1], 5000)


def test_patched_model_has_no_fault_and_keeps_everything_else(llama3, patched):
    folder, model = llama3
    report = surgery.doctor(patched, surgery.requested_values(from_model=folder))
    assert report["faults"] == 0 and len(report["sites"]) == 1
    before, after = onnx.load(str(model)), onnx.load(str(patched))
    assert [(n.name, list(n.input), list(n.output)) for n in before.graph.node] == [(n.name, list(n.input), list(n.output)) for n in after.graph.node]
    unchanged = {t.name: onh.to_array(t) for t in after.graph.initializer}
    for t in before.graph.initializer:
        if t.name not in ("cos_cache", "sin_cache"):
            assert np.array_equal(onh.to_array(t), unchanged[t.name]), t.name
    head = onnx.load(str(patched), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in head.graph.initializer)


def test_without_a_limit_the_caches_keep_the_models_max_positions(llama3):
    folder, model = llama3
    fixed = surgery.patch(onnx.load(str(model)), surgery.requested_values(from_model=folder)).model
    assert {tuple(t.dims) for t in fixed.graph.initializer if t.name in ("cos_cache", "sin_cache")} == {(2048, 8)}


def test_patch_is_byte_identical_across_runs(llama3, patched, tmp_path):
    folder, model = llama3
    again = tmp_path / "model.onnx"
    surgery.patch_file(model, again, surgery.requested_values(from_model=folder), LIMIT)
    for name in ("model.onnx", "model.onnx.data", "genai_config.json"):
        assert (patched.parent / name).read_bytes() == (tmp_path / name).read_bytes(), name


@pytest.mark.parametrize("source", [None, "default"])
def test_an_unprovable_patch_names_the_node_and_writes_nothing(llama3, tmp_path, source):
    folder, model = llama3
    values = None if source is None else surgery.requested_values(from_model=sf.tiny_llama("plain-rope", "default"))
    with pytest.raises(PosexportError, match="GroupQueryAttention node '/model/layers.0/attn/GroupQueryAttention'"):
        surgery.patch_file(model, tmp_path / "out.onnx", values, LIMIT)
    assert list(tmp_path.iterdir()) == []


def test_doctor_notes_an_output_wired_past_the_layers(llama3):
    model = onnx.load(str(llama3[1]))
    final = next(n for n in model.graph.node if "final_norm" in n.name)
    final.input[0] = "/model/embed_tokens/Gather/output_0"  # the logits now skip both layers' attention
    final.input[1] = "/model/embed_tokens/Gather/output_0"
    report = surgery.diagnose(model)
    assert any("'logits' does not depend on /model/layers.0/attn/GroupQueryAttention" in note for note in report["notes"])
    assert "notes" not in surgery.diagnose(onnx.load(str(llama3[1])))


def branch_caches(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The Constant caches in both branches of the If that picks Phi-3's short or long pair."""
    (choose,) = [n for n in model.graph.node if n.op_type == "If"]
    return {node.output[0]: onh.to_array(node.attribute[0].t) for a in choose.attribute for node in a.g.node}


def test_phi3_longrope_caches_switched_by_an_if_are_both_rebuilt(tmp_path):
    folder = sf.tiny_phi3("phi3-genai")
    model = sf.genai_export(folder)
    values = surgery.requested_values(from_model=folder)
    (site,) = surgery.doctor(model, values)["sites"]
    assert site["recovered"]["regime_switch"] == 64 and site["recovered"]["short_rows"] == 64 and site["recovered"]["rows"] == 256
    assert [f["fault"] for f in site["faults"]] == ["position-limit", "precision", "precision"]
    out = tmp_path / "model.onnx"
    surgery.patch_file(model, out, values, 1024)
    config = json.loads((folder / "config.json").read_text())["rope_parameters"]
    theta = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    factor = np.sqrt(1 + np.log(256 / 64) / np.log(64))
    caches = branch_caches(onnx.load(str(out)))
    for regime, rows, factors in (("small", 64, config["short_factor"]), ("large", 1024, config["long_factor"])):
        angles = np.arange(rows)[:, None] * theta / np.asarray(factors)
        assert np.abs(caches[f"cos_cache_{regime}"] - np.cos(angles) * factor).max() <= 2e-7
        assert np.abs(caches[f"sin_cache_{regime}"] - np.sin(angles) * factor).max() <= 2e-7
    assert surgery.doctor(out, values)["faults"] == 0
    report = model_parity(out, model, cases=[FeedCase(64), FeedCase(100), FeedCase(1, 600)], runtimes=["ort-cpu"], outputs=["logits"])
    assert report.passed and "cos_cache dimension 0" in report.not_compared[-1].reason


def generate(folder: Path, prompt: int) -> list[int]:
    """Three greedy tokens after a seeded prompt, by onnxruntime-genai from the folder."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=prompt + 3, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.random.default_rng(0).integers(3, sf.VOCAB, size=prompt).astype(np.int32))
    tokens = []
    while not generator.is_done():
        generator.generate_next_token()
        tokens.append(int(generator.get_next_tokens()[0]))
    return tokens


def test_onnxruntime_genai_runs_the_patched_folder_past_the_old_context(llama3, patched):
    assert len(generate(patched.parent, 5000)) == 3
    with pytest.raises(Exception, match="context_length"):
        generate(llama3[1].parent, 5000)
