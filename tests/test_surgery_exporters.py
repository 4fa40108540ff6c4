"""Rope sites as the exporters users use write them, patched and held against float64 transformers past
max_position_embeddings (64): transformers 5's own exporter with and without onnxruntime fusions,
optimum-onnx (its own virtual environment, else skipped), Cohere's interleaved cos/sin and GLM's
partial interleaved rotary (torch.onnx dynamo), onnxruntime-genai's float16 output."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from posexport import surgery
from posexport.surgery.doctor import reaching
from posexport.surgery.graph import Graph
from posexport.verdicts import FeedCase, model_parity

from . import exporter_fixtures as ef
from . import surgery_fixtures as sf

pytest.importorskip("transformers")
LONG = [FeedCase(16), FeedCase(2100)]  # inside max_position_embeddings (64) and far past it
EXACT = 2e-5  # patched logits against float64 transformers


@functools.lru_cache(maxsize=None)
def folder(arch: str) -> Path:
    return ef.save_model(ef.tiny_config(arch), sf.ROOT / f"x-{arch}")


@functools.lru_cache(maxsize=None)
def exported(arch: str, exporter: str) -> Path:
    try:
        return ef.EXPORTERS[exporter](folder(arch), sf.ROOT / f"x-{arch}-{exporter}")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


def patched(model: Path, values=None) -> Path:
    out = model.parent / "patched" / "model.onnx"
    if not out.is_file():
        out.parent.mkdir(exist_ok=True)
        surgery.patch_file(model, out, values)
    return out


def errors(model: Path, reference, cases=LONG) -> list[float]:
    """The logits' error per case against float64 transformers (a model folder) or a float64 runner."""
    oracle = {"against_hf": reference} if isinstance(reference, Path) else {"oracle": reference}
    report = model_parity(model, cases=cases, runtimes=["ort-cpu"], tolerance=1.0, outputs=["logits"], **oracle)
    assert report.results and not report.not_compared and all(r.comparison for r in report.results), report
    return [r.comparison.normalised for r in report.results]


def nodes_by_name(path: Path) -> dict[str, onnx.NodeProto]:
    return {n.name: n for n in onnx.load(str(path), load_external_data=False).graph.node}


@pytest.mark.parametrize("fusions, op, ops", [("cpu", "GroupQueryAttention", 2), ("cuda", "RotaryEmbedding", 4)])
def test_transformers_exporter_with_ort_fusions_gets_exact_per_token_caches(fusions, op, ops):
    model = exported("llama", f"transformers-onnx-ort-{fusions}")  # "cuda" fusions built here on CPU, run by onnxruntime CPU
    (site,) = surgery.find(model)
    assert site.kind == "rope-cache-per-token" and site.recovered["op"] == op and len(site.feeds) == ops  # per layer; q and k
    assert site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    fixed = patched(model)
    after = surgery.doctor(fixed)
    assert after["faults"] == 0 and [s["kind"] for s in after["sites"]] == ["posexport"]
    # Touching nothing else: every fused op reads the same inputs, and only the rope's own nodes went.
    before_nodes, after_nodes = nodes_by_name(model), nodes_by_name(fixed)
    for name in site.feeds:
        assert list(after_nodes[name].input) == list(before_nodes[name].input)
    graph = Graph(onnx.load(str(model), load_external_data=False), model)
    rope_nodes = set().union(*(reaching(graph, name) for pair in site.tensors["pairs"] for name in pair))
    assert set(before_nodes) - set(after_nodes) <= rope_nodes
    reference = (folder("llama"))
    before, fixed_errors = errors(model, reference), errors(fixed, reference)
    assert fixed_errors[-1] <= EXACT < before[-1]  # 2100 tokens: float32 angles drift, exact ones do not


def test_transformers_exporter_without_fusions_is_patched():
    model = exported("llama", "transformers-onnx")
    (site,) = surgery.find(model)
    assert site.kind == "rope-inv-freq"
    report = surgery.doctor(model)
    assert report["exporter"]["name"] == "transformers.exporters (OnnxExporter)" and report["exporter"]["transformers"].startswith("5.")
    assert max(errors(patched(model), (folder("llama")))) <= EXACT


def test_optimum_matmul_rotary_is_recognised_and_patched():
    model = exported("llama", "optimum")  # TorchScript, with past, transformers 4.57 in its own environment
    (site,) = surgery.find(model)
    assert site.kind == "rope-matmul" and site.anchor == "Cos node '/model/rotary_emb/Cos'"
    assert site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    assert surgery.doctor(model)["exporter"]["name"] == "optimum-onnx (TorchScript)"
    reference = (folder("llama"))
    before, after = errors(model, reference), errors(patched(model), reference)
    assert after[-1] <= EXACT < before[-1]


def cohere_float64(directory: Path):
    """Cohere in float64, its rotary cos/sin from float64 angles, each frequency repeated twice in a row
    as transformers' CohereRotaryEmbedding lays them out (frequencies written here from the config)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float64).eval()
    config = model.config
    dim = config.hidden_size // config.num_attention_heads
    inv_freq = torch.from_numpy(config.rope_parameters["rope_theta"] ** (-np.arange(0, dim, 2, dtype=np.float64) / dim))

    def forward(x, position_ids):  # noqa: ANN001
        emb = torch.repeat_interleave(position_ids[..., None].double() * inv_freq, 2, dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    model.model.rotary_emb.forward = forward

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ids = torch.from_numpy(feeds["input_ids"])
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=torch.from_numpy(feeds["position_ids"]), use_cache=False)
        return {"logits": out.logits.numpy()}

    run.label = "cohere float64"
    return run


def test_cohere_interleaved_cos_sin_is_patched():
    model = exported("cohere", "torch-dynamo")
    (site,) = surgery.find(model)
    theta = json.loads((folder("cohere") / "config.json").read_text())["rope_parameters"]["rope_theta"]
    assert site.kind == "rope-interleaved" and site.recovered["recognised"] == {"head_dim": 16, "base": theta}
    reference = cohere_float64(folder("cohere"))
    before, after = errors(model, reference), errors(patched(model), reference)
    assert after[-1] <= EXACT and 5 * after[-1] < before[-1]  # 2100 tokens: 1.0e-5 before, 1.0e-6 after


def test_glm_partial_interleaved_rotary_is_patched_from_its_folder():
    model = exported("glm", "torch-dynamo")
    (site,) = surgery.find(model)
    assert site.recovered["rotary_dim"] == 8 and site.recovered["cos_layout"] == "halves repeated (Concat(a, a))"
    values = surgery.requested_values(from_model=folder("glm"))
    assert values[0]["pair_layout"] == "interleaved"  # laid out downstream of cos/sin: the rewrite keeps that
    reference = (folder("glm"))
    assert max(errors(patched(model, values), reference)) <= EXACT


def test_genai_float16_caches_are_rebuilt_in_float16_past_the_limit(tmp_path):
    model = exported("mistral", "genai-fp16")
    values = surgery.requested_values(from_model=folder("mistral"))
    report = surgery.doctor(model, values, from_model=folder("mistral"))
    faults = {f["fault"]: f for f in report["exporter_faults"]}
    assert faults["float16-cache"]["this_exporter"] and faults["caches-cut-at-max-positions"]["value"] == 64
    out = tmp_path / "model.onnx"
    surgery.patch_file(model, out, values, 4096)
    caches = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer if "cache" in t.name}
    angles = np.arange(4096, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, 16, 2) / 16)
    assert caches["cos_cache"].dtype == np.float16 and caches["cos_cache"].shape == (4096, 8)
    # float64 values rounded once to float16: within half a unit in the last place
    assert np.max(np.abs(caches["cos_cache"].astype(np.float64) - np.cos(angles))) <= 2.5e-4
    assert np.max(np.abs(caches["sin_cache"].astype(np.float64) - np.sin(angles))) <= 2.5e-4
    report = model_parity(out, model, cases=[FeedCase(16), FeedCase(100)], runtimes=["ort-cpu"], tolerance=1e-2, outputs=["logits"])
    (inside,), (past,) = report.results, report.not_compared  # the original stops at 64: nothing to compare past it
    assert inside.status == "pass" and past.case == "prompt 100" and "the reference fails" in past.reason
    left = {f["fault"] for f in surgery.doctor(out, values, from_model=folder("mistral"))["exporter_faults"]}
    assert left == {"float16-cache"}  # 4096 rows now; float16 is the op's own type


def test_genai_int4_caches_are_rebuilt_exactly_and_run_past_the_limit(tmp_path):
    model = exported("qwen3", "genai-int4")  # MatMulNBits weights; the caches stay float32
    report = surgery.doctor(model, surgery.requested_values(from_model=folder("qwen3")), from_model=folder("qwen3"))
    assert "MatMulNBits weights (int4)" in report["exporter"]["evidence"]
    assert {f["fault"] for f in report["exporter_faults"]} == {"caches-cut-at-max-positions"}
    out = tmp_path / "model.onnx"
    surgery.patch_file(model, out, surgery.requested_values(from_model=folder("qwen3")), 4096)
    caches = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer if "cache" in t.name}
    angles = np.arange(4096, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, 16, 2) / 16)
    assert np.max(np.abs(caches["cos_cache"].astype(np.float64) - np.cos(angles))) <= 6e-8  # float32 rounding of float64
    report = model_parity(out, model, cases=[FeedCase(16), FeedCase(2100)], runtimes=["ort-cpu"], tolerance=1e-5, outputs=["logits"])
    (inside,), (past,) = report.results, report.not_compared  # the original stops at 64: nothing to compare past it
    assert inside.status == "pass" and past.case == "prompt 2100" and "the reference fails" in past.reason
