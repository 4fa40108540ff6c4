"""Rope sites as the exporters users use write them, patched and held against float64 transformers past
max_position_embeddings (64): transformers 5's own exporter with and without onnxruntime fusions,
optimum-onnx (its own virtual environment, else skipped), Cohere's interleaved cos/sin and GLM's
partial interleaved rotary (torch.onnx dynamo), onnxruntime-genai's float16 output."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest

from posexport import surgery
from posexport.surgery.doctor import reaching
from posexport.surgery.graph import Graph
from posexport.surgery.hfref import hf_reference
from posexport.surgery.modelparity import FeedCase

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
    rows = surgery.model_parity(model, reference, cases, tolerance=1.0, outputs=["logits"])["rows"]
    assert not any(r["model_fails"] or r["reference_fails"] for r in rows), rows
    return [r["error"] for r in rows]


def nodes_by_name(path: Path) -> dict[str, onnx.NodeProto]:
    return {n.name: n for n in onnx.load(str(path), load_external_data=False).graph.node}


def test_transformers_exporter_with_ort_fusions_gets_exact_per_token_caches():
    model = exported("llama", "transformers-onnx-ort-cpu")
    (site,) = surgery.find(model)
    assert site.kind == "rope-cache-per-token" and site.recovered["op"] == "GroupQueryAttention" and len(site.feeds) == 2
    assert site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    fixed = patched(model)
    after = surgery.doctor(fixed)
    assert after["faults"] == 0 and [s["kind"] for s in after["sites"]] == ["posexport"]
    # Touching nothing else: every fused op reads the same inputs, and only the rope's own nodes went.
    before_nodes, after_nodes = nodes_by_name(model), nodes_by_name(fixed)
    for name in site.feeds:
        assert list(after_nodes[name].input) == list(before_nodes[name].input)
    graph = Graph(onnx.load(str(model), load_external_data=False))
    rope_nodes = set().union(*(reaching(graph, name) for pair in site.tensors["pairs"] for name in pair))
    assert set(before_nodes) - set(after_nodes) <= rope_nodes
    reference = hf_reference(folder("llama"))
    before, fixed_errors = errors(model, reference), errors(fixed, reference)
    assert fixed_errors[-1] <= EXACT < before[-1]  # 2100 tokens: float32 angles drift, exact ones do not


def test_transformers_exporter_without_fusions_is_patched():
    model = exported("llama", "transformers-onnx")
    (site,) = surgery.find(model)
    assert site.kind == "rope-inv-freq"
    report = surgery.doctor(model)
    assert report["exporter"]["name"] == "transformers.exporters (OnnxExporter)" and report["exporter"]["transformers"].startswith("5.")
    assert max(errors(patched(model), hf_reference(folder("llama")))) <= EXACT


def test_optimum_matmul_rotary_is_recognised_and_patched():
    model = exported("llama", "optimum")  # TorchScript, with past, transformers 4.57 in its own environment
    (site,) = surgery.find(model)
    assert site.kind == "rope-matmul" and site.anchor == "Cos node '/model/rotary_emb/Cos'"
    assert site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    assert surgery.doctor(model)["exporter"]["name"] == "optimum-onnx (TorchScript)"
    reference = hf_reference(folder("llama"))
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
    assert site.kind == "rope-interleaved" and site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    reference = cohere_float64(folder("cohere"))
    before, after = errors(model, reference), errors(patched(model), reference)
    assert after[-1] <= EXACT < before[-1]


def test_glm_partial_interleaved_rotary_is_patched_from_its_folder():
    model = exported("glm", "torch-dynamo")
    (site,) = surgery.find(model)
    assert site.recovered["rotary_dim"] == 8 and site.recovered["cos_layout"] == "halves repeated (Concat(a, a))"
    values = surgery.requested_values(from_model=folder("glm"))
    assert values[0]["pair_layout"] == "interleaved"  # laid out downstream of cos/sin: the rewrite keeps that
    reference = hf_reference(folder("glm"))
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
    rows = surgery.model_parity(out, model, [FeedCase(16), FeedCase(100)], tolerance=1e-2, outputs=["logits"])["rows"]
    assert rows[0]["ok"] and not rows[1]["model_fails"] and rows[1]["reference_fails"]  # the original stops at 64
