"""Whole-model verdicts on trained models (tests/trained_fixtures.py: a Llama with tied embeddings and a
Gemma-3 with a sliding layer, trained here on Python's docstrings), both ways, on real text (the LICENSE,
which they were not trained on) and on random ids:

- a correct patched export passes, every output within max(1e-4, 4 × floor), the floor being transformers'
  own float32 forward on the same feeds, measured and shown for each output with the worst position;
- a rope base 1% off, an attention factor applied twice, and a cache frozen at max_position_embeddings fail;
- onnxruntime-genai's tied embeddings (gathered from Transpose(lm_head)) are read, and every cache compared;
- Gemma's sliding layer is compared past its window, on the rows both sides keep;
- next-token agreement and greedy decoding through the model's own cache are reported in every format;
- doctor finds no fault in what patch wrote, and onnxruntime-genai's generator runs it.

Every exporter on both models, at 2000 tokens with 64 greedy tokens, is `make trained` (benchmarks/trained.md)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from posexport import surgery
from posexport.reports import parity as reports
from posexport.verdicts import FLOOR_FACTOR, FeedCase, from_json, model_parity, to_json

from zoo import exporters as ef
from . import surgery_fixtures as sf
from . import trained_fixtures as tf
from .test_parity_cli import cli

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
PAST = 300  # past max_position_embeddings (256), where the exports' own float32 angles start to drift
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


def exported(arch: str, exporter: str) -> Path:
    try:
        return tf.export(arch, exporter)
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


@functools.lru_cache(maxsize=None)
def patched(arch: str, exporter: str, position_limit: int = 512) -> Path:
    model = exported(arch, exporter)
    out = model.parent.with_name(model.parent.name + "-patched") / "model.onnx"
    surgery.patch_file(model, out, surgery.requested_values(from_model=tf.trained(arch)), position_limit)
    return out


def judged(model: Path, folder: Path, random_ids: bool, cases=(FeedCase(64), FeedCase(PAST)), **options):
    text = {"random_ids": True} if random_ids else {"text": tf.TEXT}
    return model_parity(model, against_hf=folder, cases=list(cases), runtimes=["ort-cpu"], **text, **options)


def floor_aware(report) -> None:
    """Every output compared, its floor measured, its bound max(1e-4, 4 × floor), its worst position given."""
    assert report.results and not report.not_compared, report.not_compared
    for r in report.results:
        assert r.floor is not None and 0 < r.floor < 1e-5 or r.output.endswith("_sliding_window_tensor"), r
        assert r.comparison.bound == max(1e-4, FLOOR_FACTOR * r.floor)
        assert r.position is not None or r.output.endswith("_sliding_window_tensor")


@pytest.mark.parametrize("random_ids", [False, True], ids=["text", "random-ids"])
def test_a_patched_genai_export_with_tied_embeddings_passes_at_its_floor(random_ids):
    pytest.importorskip("onnxruntime_genai")
    report = judged(patched("llama", "genai-fp32"), tf.trained("llama"), random_ids, original=exported("llama", "genai-fp32"))
    assert report.passed, reports.verdict_line(report)
    floor_aware(report)
    assert {r.output for r in report.results} == {"logits", *(f"present.{n}.{k}" for n in range(2) for k in ("key", "value"))}
    assert all(r.comparison.normalised <= FLOOR_FACTOR * r.floor for r in report.results)  # at the floor, far under 1e-4
    far = [r for r in report.results if r.case == f"prompt {PAST}"]
    assert all("cos_cache dimension 0 shall not be less than total_sequence_length" in r.original for r in far)  # frozen at 256
    logits = next(r for r in far if r.output == "logits")
    assert logits.tokens.positions == PAST and logits.tokens.agreed == PAST
    assert report.settings["inputs"].startswith("random token ids" if random_ids else "text LICENSE (")


@pytest.mark.parametrize("random_ids", [False, True], ids=["text", "random-ids"])
def test_a_rope_one_percent_off_and_an_attention_factor_applied_twice_fail(random_ids):
    base_off = sf.torch_export_with_cache(tf.variant("llama", "base-off", rope_theta=10100.0))
    report = judged(base_off, tf.trained("llama"), random_ids)
    failed = {r.output for r in report.results if r.status == "fail"}
    assert not report.passed and {"logits", "present.0.key", "present.1.key"} <= failed, reports.verdict_line(report)
    yarn = tf.variant("llama", "yarn", **YARN)
    right = judged(sf.torch_export_with_cache(yarn), yarn, random_ids)
    assert right.passed, reports.verdict_line(right)
    floor_aware(right)
    twice = judged(sf.torch_export_with_cache(yarn, attention_factor_times=2), yarn, random_ids)
    assert not twice.passed and min(r.comparison.normalised for r in twice.results if r.output.endswith("key")) > 0.1
    logits = next(r for r in twice.results if r.output == "logits" and r.case == f"prompt {PAST}")
    assert logits.tokens.agreed < logits.tokens.positions and logits.tokens.largest_margin > 0


@pytest.mark.parametrize("random_ids", [False, True], ids=["text", "random-ids"])
def test_a_cache_frozen_at_max_positions_fails_past_it(random_ids):
    pytest.importorskip("onnxruntime_genai")
    original = exported("llama", "genai-fp32")  # caches of max_position_embeddings (256) rows
    report = judged(original, tf.trained("llama"), random_ids)
    inside, past = ([r for r in report.results if r.case == case] for case in ("prompt 64", f"prompt {PAST}"))
    assert all(r.status == "pass" for r in inside) and len(inside) == 5
    assert not report.passed and [r.status for r in past] == ["error"]
    assert "cos_cache dimension 0 shall not be less than total_sequence_length" in past[0].message


@pytest.mark.parametrize("random_ids", [False, True], ids=["text", "random-ids"])
def test_gemma_sliding_layers_are_compared_past_their_window(random_ids):
    model = patched("gemma3", "transformers-onnx")
    report = judged(model, tf.trained("gemma3"), random_ids)
    assert report.passed and report.strictly_passed(), reports.verdict_line(report)
    floor_aware(report)
    sliding = [r for r in report.results if r.case == f"prompt {PAST}" and r.output.startswith("cache.layers.0.")
               and not r.output.endswith("_sliding_window_tensor")]
    assert len(sliding) == 2 and all(r.note == f"the last 15 rows: a sliding layer (the model keeps {PAST} rows, transformers 15)"
                                     for r in sliding)
    assert all(PAST - 15 <= r.position < PAST for r in sliding)
    window = next(r for r in report.results if r.output.endswith("_sliding_window_tensor"))
    assert window.comparison.normalised == 0  # transformers' own cache tensor: the window, 16


def test_greedy_decoding_through_the_models_own_cache_and_without_one():
    pytest.importorskip("onnxruntime_genai")
    folder = tf.trained("llama")
    own = judged(patched("llama", "genai-fp32"), folder, False, [FeedCase(PAST)], generate=64)
    (g,) = own.generations
    assert (g.steps, g.agreed, g.first_divergence) == (64, 64, None) and g.cache.startswith("its own KV cache")
    assert 0 < g.largest_gap < 1e-5
    rerun = judged(sf.torch_export_with_cache(folder), folder, False, [FeedCase(40)], generate=8)
    (g,) = rerun.generations
    assert (g.steps, g.agreed) == (8, 8) and g.cache.startswith("the whole sequence each step")
    yarn = tf.variant("llama", "yarn", **YARN)  # both ways: the attention factor twice diverges
    wrong = judged(sf.torch_export_with_cache(yarn, attention_factor_times=2), yarn, False, [FeedCase(200)], generate=16)
    (g,) = wrong.generations
    assert g.first_divergence is not None and g.tokens[0] != g.tokens[1] and g.largest_gap > 1e-2


def test_every_report_format_shows_floor_bound_position_and_tokens(tmp_path):
    pytest.importorskip("onnxruntime_genai")
    model = patched("llama", "genai-fp32")
    code, out, err = cli("model-parity", "--model", str(model), "--against-hf", str(tf.trained("llama")), "--text", str(tf.TEXT),
                         "--prompt", str(PAST), "--generate", "8", "--runtimes", "ort-cpu", "--json", str(tmp_path / "r.json"),
                         "--junit", str(tmp_path / "r.xml"), "--markdown", str(tmp_path / "r.md"))
    assert code == 0, out + err
    text = " ".join(out.split())
    assert "inputs: text LICENSE (" in text and "bound max(0.0001, 4 × floor)" in text
    assert f"next-token agreement 100.0% at worst (prompt {PAST}, ort-cpu: {PAST}/{PAST})" in text
    assert "8/8 greedy tokens agree with transformers" in text and text.endswith("0 runtimes unavailable")
    report = from_json((tmp_path / "r.json").read_text())
    assert to_json(report) == (tmp_path / "r.json").read_text()  # the codec round-trips the new fields
    logits = next(r for r in report.results if r.output == "logits")
    assert logits.tokens.agreed == PAST and logits.floor > 0 and report.generations[0].steps == 8
    markdown = (tmp_path / "r.md").read_text()
    assert "## Outputs" in markdown and "| floor | bound | at position | next token |" in markdown
    assert f"{PAST}/{PAST} (100.0%)" in markdown and "## Greedy decoding" in markdown
    junit = (tmp_path / "r.xml").read_text()
    assert "floor" in junit and "next token" in junit and "greedy decoding" in junit


def test_doctor_is_clean_on_what_patch_wrote_and_genai_runs_it(tmp_path):
    pytest.importorskip("onnxruntime_genai")
    folder = tf.trained("llama")
    fixed = tmp_path / "fixed" / "model.onnx"
    assert cli("patch", str(exported("llama", "genai-fp32")), "--out", str(fixed), "--from-model", str(folder))[0] == 0
    code, out, _ = cli("doctor", str(fixed), "--from-model", str(folder), "--fail-on")
    text = " ".join(out.split())
    assert code == 0 and "position limit 256 (chosen with posexport patch)" in text and text.endswith("PASS: 0 faults in 1 site")
    promising = tf.variant("llama", "promising-4096")  # the same model, its config promising more positions
    config = json.loads((promising / "config.json").read_text())
    (promising / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 4096}))
    code, out, _ = cli("doctor", str(exported("llama", "genai-fp32")), "--from-model", str(promising), "--fail-on")
    assert code == 1 and "the caches hold 256 rows, the config promises 4096 positions" in " ".join(out.split())
    # onnxruntime-genai's generator loads the patched folder and decodes what transformers decodes
    prompt = tf.tokenizer().encode(tf.TEXT.read_text()).ids[:100]
    assert tf.genai_greedy(fixed.parent, prompt, 16) == tf.greedy(folder, prompt, 16)
