"""Whole-model verdicts, both ways, on tiny models with transformers' default initialisation (std 0.02),
where the logits hardly move with the rope: a correct export passes against float64 transformers, and
three wrong ones fail — a rope base 1% off, an attention factor applied twice, and a cache read past the
max_position_embeddings rows it was frozen at. The rotated keys of the KV cache are what catch them."""

from __future__ import annotations

import pytest

from posexport.verdicts import FeedCase, model_parity

from . import surgery_fixtures as sf

pytest.importorskip("transformers")
CASES = [FeedCase(16), FeedCase(60)]


def judged(model, folder, cases=CASES, outputs=None):
    return model_parity(model, against_hf=folder, cases=cases, runtimes=["ort-cpu"], outputs=outputs)


def worst(report, output):
    return max(r.comparison.normalised for r in report.results if r.comparison and output in r.output)


@pytest.fixture(scope="module")
def llama():
    return sf.default_init_llama("verdict-llama")


def test_a_correct_export_passes_with_every_cache_compared(llama):
    report = judged(sf.torch_export_with_cache(llama), llama)
    assert report.passed and not report.not_compared, report
    assert {r.output for r in report.results} == {"logits", *(f"present.{n}.{k}" for n in range(2) for k in ("key", "value"))}


def test_a_base_one_percent_off_fails_on_the_key_cache_not_on_the_logits(llama):
    wrong = sf.default_init_llama("verdict-llama-base-off", base=10100.0, weights_of=llama)
    report = judged(sf.torch_export_with_cache(wrong), llama)
    assert not report.passed
    assert worst(report, "logits") < 1e-4 < worst(report, "key")  # the logits alone would have passed it
    assert {r.output for r in report.results if r.status == "fail"} == {"present.0.key", "present.1.key"}


def test_an_attention_factor_applied_twice_fails():
    yarn = sf.default_init_llama("verdict-yarn", scaling="yarn")
    assert judged(sf.torch_export_with_cache(yarn), yarn).passed
    report = judged(sf.torch_export_with_cache(yarn, attention_factor_times=2), yarn)
    assert not report.passed and worst(report, "key") > 1e-2


def test_a_cache_frozen_at_max_position_embeddings_fails_past_it():
    pytest.importorskip("onnxruntime_genai")
    folder = sf.default_init_llama("verdict-genai", max_positions=64)
    model = sf.genai_export(folder)
    inside = judged(model, folder, [FeedCase(16), FeedCase(1, 40)])
    assert inside.passed and not inside.not_compared, inside  # logits and present.* against float64 transformers
    past = judged(model, folder, [FeedCase(100)])
    assert not past.passed and past.results[0].status == "error" and "cos_cache" in past.results[0].message


def test_transformers_exporters_model_is_judged_on_its_caches_too(llama, tmp_path):
    """transformers 5's own OnnxExporter returns the cache as cache.layers.N.keys/values: mapped by layer
    and compared with float64 transformers' own, beside the logits; a base 1% off fails on the keys."""
    from zoo import exporters as ef

    try:
        model = ef.transformers_onnx(llama, tmp_path / "transformers")
        wrong = ef.transformers_onnx(sf.default_init_llama("verdict-llama-base-off", base=10100.0, weights_of=llama),
                                     tmp_path / "transformers-base-off")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))
    report = judged(model, llama)
    caches = {r.output for r in report.results} - {"logits"}
    assert report.passed and not report.not_compared and len(caches) == 4, report
    bad = judged(wrong, llama)
    assert not bad.passed and worst(bad, "logits") < 1e-4 < max(r.comparison.normalised for r in bad.results if "key" in r.output)


def test_the_oracles_logits_by_rows_are_its_own_forwards():
    """The oracle keeps the body's hidden states and forms any rows of logits with the model's own head:
    Gemma-2's final softcap (tanh(x / 30) · 30) included, they are its whole forward's logits."""
    import numpy as np
    import torch

    import zoo
    from posexport.verdicts import HfOracle

    hf = HfOracle(zoo.save_model(zoo.tiny_config("gemma2"), sf.ROOT / "x-gemma2"))
    ids = np.random.default_rng(0).integers(0, zoo.VOCAB, (2, 12))
    expected = hf.expect({"input_ids": ids, "position_ids": np.broadcast_to(np.arange(12), (2, 12))})
    assert expected.rows is not None and expected.logits_shape == (2, 12, zoo.VOCAB)
    with torch.no_grad():
        whole = hf.model(input_ids=torch.from_numpy(ids), logits_to_keep=0).logits.numpy().reshape(24, zoo.VOCAB)
    rows = np.concatenate([expected.logits_rows(0, 5), expected.logits_rows(5, 24)])
    assert np.abs(rows - whole).max() <= 1e-12 * np.abs(whole).max()
    assert hf.model.config.final_logit_softcapping == 30.0 and np.abs(whole).max() < 30.0
