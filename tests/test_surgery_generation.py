"""transformers 5's ``OnnxExporter.export_for_generation``: one ONNX file per generation stage, the prompt's
(prefill.onnx) and a one-token step on past key/values (decode.onnx), with and without onnxruntime fusions.
Each component's rope site is found and patched, and each is held against float64 transformers (logits and
every layer's key and value cache) past max_position_embeddings (64): the prefill at 2100 tokens, the
decode step at position 10000 on that many past key/values, where the export's float32 angles drift."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from posexport import surgery
from posexport.errors import PosexportError
from posexport.verdicts import FeedCase, model_parity

import zoo
from zoo import exporters as ef
from . import surgery_fixtures as sf

pytest.importorskip("transformers")
EXACT = 2e-5  # patched outputs against float64 transformers
# stage -> its cases: inside max_position_embeddings, then far past it
CASES = {"prefill": [FeedCase(16), FeedCase(2100)], "decode": [FeedCase(1, 16), FeedCase(1, 10000)]}


@functools.lru_cache(maxsize=None)
def folder() -> Path:
    return zoo.save_model(zoo.tiny_config("llama"), sf.ROOT / "x-llama")


@functools.lru_cache(maxsize=None)
def components(fusions: str | None, multi_token_decode: bool = False) -> Path:
    """The export's folder (prefill.onnx, decode.onnx), made once per session for each form."""
    name = f"x-llama-generation-{fusions or 'plain'}{'-multi' if multi_token_decode else ''}"
    try:
        return ef.transformers_onnx_generation(folder(), sf.ROOT / name, fusions, multi_token_decode)
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


def patched(model: Path) -> Path:
    out = model.parent / "patched" / model.name
    if not out.is_file():
        out.parent.mkdir(exist_ok=True)
        surgery.patch_file(model, out, surgery.requested_values(from_model=folder()))
    return out


# form -> (ort_fusions, multi_token_decode, the fused op reading each stage's cos/sin); no op: the plain
# per-call rope. "cuda" fusions are built here on CPU: RotaryEmbedding in the prefill, GroupQueryAttention
# in the decode step. multi_token_decode changes only the decode step (its prefill is the "cpu" form's).
GQA = "GroupQueryAttention"
FORMS = {"plain": (None, False, {"prefill": None, "decode": None}), "cpu": ("cpu", False, {"prefill": GQA, "decode": GQA}),
         "cuda": ("cuda", False, {"prefill": "RotaryEmbedding", "decode": GQA}), "cpu-multi-token-decode": ("cpu", True, {"decode": GQA})}


@pytest.mark.parametrize("form", FORMS)
def test_each_generation_component_is_patched_and_exact_past_max_positions(form):
    fusions, multi, ops = FORMS[form]
    for stage, op in ops.items():
        model = components(fusions, multi) / f"{stage}.onnx"
        cases = [FeedCase(16), CASES[stage][-1]] if multi else CASES[stage]  # its decode step takes a prompt too
        (site,) = surgery.find(model)
        assert (site.kind, site.recovered.get("op")) == ("rope-cache-per-token" if op else "rope-inv-freq", op), stage
        assert site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
        before = surgery.doctor(model)
        assert f"component {stage!r} of prefill, decode" in before["exporter"]["evidence"][0]
        assert [f["fault"] for s in before["sites"] for f in s["faults"]] == ["trig-per-call"]
        fixed = patched(model)
        assert surgery.doctor(fixed)["faults"] == 0
        report = model_parity(fixed, against_hf=folder(), cases=cases, runtimes=["ort-cpu"], tolerance=EXACT, original=model)
        assert report.passed and not report.not_compared and len(report.results) == 10, report  # logits and 2 × 2 caches
        far = {r.output: float(r.original) for r in report.results if r.case == cases[-1].label}
        assert max(far.values()) > 2 * EXACT  # the export itself fails there: float32 angles


def test_a_decode_step_refuses_a_rope_one_percent_off():
    model = components("cpu") / "decode.onnx"
    values = surgery.requested_values(from_model=folder())
    with pytest.raises(PosexportError, match="not those of the default rope"):
        surgery.patch(model, [v | {"base": 1.01 * v["base"]} for v in values])


def test_a_prompt_given_to_the_one_token_decode_step_is_not_compared():
    report = model_parity(components("cpu") / "decode.onnx", against_hf=folder(), cases=[FeedCase(16)], runtimes=["ort-cpu"])
    (skipped,) = report.not_compared
    assert not report.passed and not report.results  # nothing compared is not a pass
    assert skipped.reason == "the model's input 'input_ids' is fixed at [1, 1]: prompt 16 needs [1, 16]"
