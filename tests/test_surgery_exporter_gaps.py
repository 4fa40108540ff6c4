"""Three exporters' forms the doctor once could not read, each exported by the real tool:

- torch.onnx dynamo of a model whose rotary is transformers 4.x's matrix product, then onnxscript's
  ``optimize_for_ort``: GroupQueryAttention reads cos/sin caches of rows 0 … max(position_ids) computed in the graph
  (once `unrecognised-caches`): found, measured, patched, and held against float64 transformers;
- onnxruntime-genai's Whisper decoder, which slices its position table from the past length (once no site at all):
  a learned-table site with its limit, where onnxruntime raises;
- onnxruntime-genai's fixed caches of a dynamic-NTK model (once a fault with no number): the cos/sin gap at 2× and
  4× max_position_embeddings, against float64 written here from the formulas."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from posexport import surgery
from posexport.errors import PosexportError
from posexport.verdicts import FeedCase, model_parity

import zoo
from zoo import exporters as ef
from . import surgery_fixtures as sf

pytest.importorskip("transformers")
POSITIONS = 64  # max_position_embeddings of the tiny models


def export(make, *args) -> Path:  # noqa: ANN001
    try:
        return make(*args)
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


@functools.lru_cache(maxsize=None)
def llama() -> Path:
    return zoo.save_model(zoo.tiny_config("llama", POSITIONS), sf.ROOT / "gaps-llama")


@functools.lru_cache(maxsize=None)
def fused_4x() -> Path:
    return export(ef.EXPORTERS["torch-dynamo-4x-optimize-for-ort"], llama(), sf.ROOT / "gaps-llama-4x-ort")


def logits_errors(model: Path, folder: Path, cases: list[FeedCase], original: Path | None = None) -> list:
    report = model_parity(model, against_hf=folder, cases=cases, runtimes=["ort-cpu"], outputs=["logits"], tolerance=1.0,
                          original=original)
    assert report.results and all(r.comparison for r in report.results), report
    return report.results


def test_optimize_for_ort_caches_computed_in_the_graph_are_found_measured_and_patched(tmp_path):
    model = fused_4x()
    (site,) = surgery.doctor(model, surgery.requested_values(from_model=llama()))["sites"]
    assert site["kind"] == "rope-cache-computed" and site["recovered"]["op"] == "GroupQueryAttention"
    assert site["recovered"]["recognised"] == {"head_dim": 16, "base": 10000.0} and len(site["feeds"]) == 2  # one per layer
    (fault,) = site["faults"]
    # Measured: float32 angles p·θ against float64, at the last trained position and at 131071.
    assert fault["fault"] == "trig-per-call" and "at position 63" in fault["detail"] and 1e-4 < fault["value"] < 1e-2
    fixed = tmp_path / "fixed" / "model.onnx"
    fixed.parent.mkdir()
    surgery.patch_file(model, fixed, surgery.requested_values(from_model=llama()))
    after = surgery.doctor(fixed)
    assert after["faults"] == 0 and [s["kind"] for s in after["sites"]] == ["posexport"]
    # Every output against float64 transformers, inside max_position_embeddings and far past it.
    results = logits_errors(fixed, llama(), [FeedCase(16), FeedCase(2100)], original=model)
    assert max(r.comparison.normalised for r in results) <= 2e-5
    assert float(results[1].original) > 5 * results[1].comparison.normalised  # the export's float32 angles, at 2100 tokens
    with pytest.raises(PosexportError, match="not those of the default rope"):  # a rope 1% off is refused
        surgery.patch_file(model, tmp_path / "wrong" / "model.onnx", {"head_dim": 16, "base": 10100.0})


@functools.lru_cache(maxsize=None)
def whisper_decoder() -> Path:
    """onnxruntime-genai's Whisper decoder (decoder.onnx beside encoder.onnx): max_target_positions 32."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    import torch

    folder = sf.ROOT / "gaps-whisper"
    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        config = WhisperConfig(vocab_size=zoo.VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
                               max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
                               eos_token_id=2, decoder_start_token_id=1)
        WhisperForConditionalGeneration(config).eval().save_pretrained(folder)
    return export(ef.genai, folder, sf.ROOT / "gaps-whisper-genai")


def whisper_feeds(past: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(past * 100 + seq)
    feeds = {"input_ids": rng.integers(3, zoo.VOCAB, (1, seq)).astype(np.int32)}
    for name, length in (("self", past), ("cross", 16)):
        for what in ("key", "value"):
            feeds[f"past_{what}_{name}_0"] = rng.standard_normal((1, 2, length, 16)).astype(np.float32)
    return feeds


def test_whisper_decoder_table_sliced_from_the_past_length_is_a_learned_table_with_its_limit(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = whisper_decoder()
    (site,) = surgery.doctor(model)["sites"]
    assert site["kind"] == "learned-table" and site["node"].startswith("Slice node")
    assert site["recovered"]["table"] == "decoder.embed_positions.weight" and site["recovered"]["positions"] == 32
    assert "dimension 2 of past_key_self_0" in site["recovered"]["positions_from"]
    assert [(f["fault"], f["value"]) for f in site["faults"]] == [("position-limit", 32)]
    # The limit is where onnxruntime stops: 32 positions run, 33 raise; a call starting at 32 gets no rows back.
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    assert session.run(["logits"], whisper_feeds(0, 32))[0].shape == (1, 32, zoo.VOCAB)
    with pytest.raises(Exception, match="Add"):
        session.run(["logits"], whisper_feeds(30, 3))
    assert session.run(["logits"], whisper_feeds(32, 1))[0].shape == (1, 0, zoo.VOCAB)
    # Grown on request: rows below the old limit kept bit for bit, so the outputs there are identical; past it, it runs.
    grown = tmp_path / "grown" / "decoder.onnx"
    surgery.patch_file(model, grown, extension=surgery.Extension(64))
    bigger = ort.InferenceSession(str(grown), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(bigger.run(["logits"], whisper_feeds(20, 5))[0], session.run(["logits"], whisper_feeds(20, 5))[0])
    assert bigger.run(["logits"], whisper_feeds(30, 3))[0].shape == (1, 3, zoo.VOCAB)


def dynamic_ntk_gap(head_dim: int, base: float, factor: float, positions: int, length: int) -> float:
    """float64, from the formulas: cos/sin of plain rope against dynamic NTK's at the last position of a call of
    ``length`` tokens (b' = b·(s·L/Lmax − (s − 1))^(d/(d−2)))."""
    exponents = np.arange(0, head_dim, 2, dtype=np.float64) / head_dim
    scaled = base * (factor * length / positions - (factor - 1)) ** (head_dim / (head_dim - 2))
    plain, dynamic = (length - 1) / base ** exponents, (length - 1) / scaled ** exponents
    return float(max(np.max(np.abs(np.cos(plain) - np.cos(dynamic))), np.max(np.abs(np.sin(plain) - np.sin(dynamic)))))


def test_genai_dynamic_ntk_built_as_fixed_caches_is_measured_at_2x_and_4x():
    folder = zoo.save_model(zoo.tiny_config("llama", POSITIONS, rope_scaling=sf.SCALINGS["dynamic"]), sf.ROOT / "gaps-dynamic")
    model = export(ef.genai, folder, sf.ROOT / "gaps-dynamic-genai")
    (site,) = surgery.doctor(model, surgery.requested_values(from_model=folder))["sites"]
    assert site["kind"] == "rope-cache"
    fault = next(f for f in site["faults"] if f["fault"] == "dynamic-exported-static")
    said = {int(n): float(gap) for gap, n in re.findall(r"([0-9.e+-]+) off at position \d+ of a (\d+)-token call", fault["detail"])}
    truth = {n: dynamic_ntk_gap(16, 10000.0, 4.0, POSITIONS, n) for n in (2 * POSITIONS, 4 * POSITIONS)}
    assert set(said) == set(truth) and all(abs(said[n] - truth[n]) <= 0.01 * truth[n] for n in truth), (said, truth)
    assert fault["value"] == pytest.approx(truth[2 * POSITIONS], abs=1e-4) and fault["value"] > 0.1
    # Both ways: the same caches held against the plain config the builder built are not dynamic, and so not at fault.
    plain = surgery.doctor(model, surgery.requested_values(from_model=sf.as_plain(folder)))["sites"][0]
    assert "dynamic-exported-static" not in {f["fault"] for f in plain["faults"]}
