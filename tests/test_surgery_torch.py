"""Model surgery on torch.onnx (dynamo) exports of transformers Llama models, held against the
transformers model in float64 (exact float64 rope angles, frequencies checked against transformers')."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
import pytest

from posexport import surgery
from posexport.errors import PosexportError
from posexport.verdicts import FeedCase, model_parity

from . import surgery_fixtures as sf

pytest.importorskip("transformers")
# Past max_position_embeddings (64): a long prompt, and chunks far out.
FAR = [FeedCase(16), FeedCase(100), FeedCase(16, 3000)]


def exported(scaling: str, plain: bool = False) -> tuple[Path, Path]:
    folder = sf.tiny_llama(f"torch-{scaling}", scaling)
    return folder, sf.torch_export(sf.as_plain(folder) if plain else folder)


def patched(model: Path, folder: Path | None, name: str) -> Path:
    out = model.parent / name / "fixed.onnx"
    out.parent.mkdir(exist_ok=True)
    values = surgery.requested_values(from_model=folder) if folder else None
    surgery.patch_file(model, out, values)
    return out


def worst(model: Path, folder: Path, cases=FAR) -> float:
    """The largest error of any output (logits, every layer's key and value cache) against float64 transformers."""
    report = model_parity(model, against_hf=folder, cases=cases, runtimes=["ort-cpu"], tolerance=1.0)
    assert report.results and not report.not_compared and all(r.comparison for r in report.results), report
    return max(r.comparison.normalised for r in report.results)


def test_default_rope_is_found_recognised_and_patched_without_parameters():
    folder, model = exported("default")
    (site,) = surgery.find(model)
    assert site.kind == "rope-inv-freq" and site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    assert site.recovered["positions"] == "position_ids" and len(site.feeds) == 8  # q and k, cos and sin, 2 layers
    report = surgery.doctor(model, surgery.requested_values(from_model=folder))
    assert [f["fault"] for f in report["sites"][0]["faults"]] == ["trig-per-call"]
    fixed = patched(model, None, "default")
    after = surgery.doctor(fixed)
    assert after["faults"] == 0 and [s["kind"] for s in after["sites"]] == ["posexport"]
    assert worst(fixed, folder) <= 2e-5
    with pytest.raises(PosexportError, match=r"found only TwoLevelCosSin node 'posexport.rope' \(posexport\)"):
        surgery.patch(onnx.load(str(fixed)))
    again = patched(model, None, "default-again")  # same file name, another folder
    assert fixed.read_bytes() == again.read_bytes()
    assert Path(str(fixed) + ".data").read_bytes() == Path(str(again) + ".data").read_bytes()


def test_positions_from_range_and_onnxscript_fusions_are_patched_too():
    folder = sf.tiny_llama("torch-no-position-ids", "default")
    model = sf.torch_export(folder, position_ids=False)  # positions: Range(seq) unsqueezed at (0, 2)
    fused = sf.ort_fused(model)
    for graph in (model, fused):
        (site,) = surgery.find(graph)
        assert site.kind == "rope-inv-freq"
    fixed = patched(fused, None, "fused")
    kinds = {n.domain for n in onnx.load(str(fixed), load_external_data=False).graph.node}
    assert {"com.microsoft", "posexport"} <= kinds
    long_prompts = [FeedCase(16), FeedCase(2000)]
    assert worst(fixed, folder, long_prompts) <= 2e-5


def test_torchscript_export_is_patched_too():
    folder, _ = exported("default")
    model = sf.torch_export(folder, dynamo=False)  # symbolic axes named b and s
    (site,) = surgery.find(model)
    assert site.anchor == "Cos node '/m/model/rotary_emb/Cos'"
    assert worst(patched(model, None, "torchscript"), folder) <= 2e-5


def test_dynamic_ntk_exported_as_plain_matches_float64_transformers_once_patched():
    folder, model = exported("dynamic", plain=True)
    report = surgery.doctor(model, surgery.requested_values(from_model=folder))
    faults = {f["fault"]: f for f in report["sites"][0]["faults"]}
    assert faults["dynamic-exported-static"]["value"] > 0.1 and "position 127" in faults["dynamic-exported-static"]["detail"]
    assert worst(model, folder) > 1e-2  # plain rope past max_position_embeddings: wrong
    fixed = patched(model, folder, "dynamic")
    assert worst(fixed, folder) <= 2e-5
    functions = {f.name for f in onnx.load(str(fixed), load_external_data=False).functions}
    assert "RopeCosSinDynamic" in functions


def test_longrope_regimes_and_attention_factor_applied_exactly_once():
    folder = sf.tiny_phi3()
    model = sf.torch_export(folder)
    (site,) = surgery.find(model)
    assert site.recovered["regime_switch"] == 64
    assert site.recovered["attention_factor"] == pytest.approx(math.sqrt(1 + math.log(4) / math.log(64)), rel=1e-6)
    with pytest.raises(PosexportError, match="not a plain or linearly scaled rope"):
        surgery.patch(onnx.load(str(model)))
    fixed = patched(model, folder, "phi3")
    nodes = onnx.load(str(fixed), load_external_data=False).graph.node
    assert not [n for n in nodes if n.op_type in ("Cos", "Sin", "Where") and "rotary" in str(n.input) + n.name]
    # Both regimes (prompts up to L0 = 64, then past it); a factor applied twice would be off by ~15%.
    assert worst(fixed, folder, [FeedCase(16), FeedCase(64), FeedCase(100), FeedCase(16, 200)]) <= 2e-5


def test_two_ropes_get_distinct_functions_and_tables():
    folder = sf.tiny_gemma3()
    model = sf.torch_export(folder)
    sites = surgery.find(model)
    assert sorted((s.recovered["recognised"] for s in sites), key=lambda r: r["base"]) == [
        {"head_dim": 16, "base": 10000.0}, {"head_dim": 16, "base": 1000000.0, "scaling": "linear", "factor": 8.0}]
    # --from-model reads both ropes (posexport.models); each site takes the one that fits it.
    chosen = surgery.patch(model, surgery.requested_values(from_model=folder)).describe()
    assert sorted((c["params"]["base"], c["params"]["scaling"]) for c in chosen) == [(10000.0, "default"), (1000000.0, "linear")]
    fixed = patched(model, None, "gemma3")
    saved = onnx.load(str(fixed), load_external_data=False)
    assert {f.name for f in saved.functions} == {"TwoLevelCosSin", "TwoLevelGather", "TwoLevelCosSin_1", "TwoLevelGather_1"}
    assert {"posexport.rope.fine_cos", "posexport.rope_1.fine_cos"} <= {t.name for t in saved.graph.initializer}
    assert surgery.doctor(fixed)["faults"] == 0
    # Within the trained length, float32 angles are still fine: the patched model agrees with the export.
    report = model_parity(fixed, model, cases=[FeedCase(16), FeedCase(40)], runtimes=["ort-cpu"], tolerance=2e-5)
    assert report.passed and not report.not_compared, report


def test_parameters_that_disagree_with_the_graph_are_refused(tmp_path):
    _, model = exported("default")
    wrong = {"head_dim": 16, "heads": 4, "base": 500000.0, "max_positions": 64}
    with pytest.raises(PosexportError, match="Cos node 'node_cos'"):
        surgery.patch_file(model, tmp_path / "out.onnx", wrong)
    assert list(tmp_path.iterdir()) == []


def test_learned_tables_alibi_and_t5_biases_are_listed_and_left_alone(tmp_path):
    # The TorchScript exporter (a second of export instead of ten) writes the same patterns here.
    gpt2 = sf.torch_export(sf.tiny_gpt2(), position_ids=False, dynamo=False)
    (table,) = surgery.doctor(gpt2)["sites"]
    assert table["kind"] == "learned-table" and table["recovered"]["rows"] == 128 and table["recovered"]["width"] == 64
    assert table["faults"][0]["fault"] == "position-limit" and table["faults"][0]["value"] == 128
    with pytest.raises(PosexportError, match="found only Gather node '/m/transformer/wpe/Gather' \\(learned-table\\)"):
        surgery.patch_file(gpt2, tmp_path / "out.onnx")
    assert list(tmp_path.iterdir()) == []
    bloom = sf.torch_export(sf.tiny_bloom(), position_ids=False, dynamo=False)
    (alibi,) = surgery.doctor(bloom)["sites"]
    assert alibi["kind"] == "alibi" and alibi["recovered"]["heads"] == 4 and alibi["recovered"]["standard_slopes"]
    assert alibi["recovered"]["positions_from"] == "CumSum" and alibi["faults"] == []
    (t5,) = surgery.doctor(sf.t5_encoder_export())["sites"]
    assert t5["kind"] == "t5-bias" and t5["recovered"] | {"table": ""} == {"table": "", "buckets": 32, "heads": 4, "bidirectional": True,
                                                                 "max_distance": 128}
    assert [f["fault"] for f in t5["faults"]] == ["bias-per-call"]
    assert surgery.doctor(sf.t5_encoder_export(), [])["faults"] == 1  # a model folder without rope: nothing to compare
