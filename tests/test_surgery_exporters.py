"""Rope sites as the exporters users use write them, patched and held against float64 transformers past
max_position_embeddings (64): transformers 5's own exporter with and without onnxruntime fusions,
optimum-onnx and mobius-onnx (each in its own virtual environment, else skipped), Cohere's interleaved
cos/sin and GLM's partial interleaved rotary (torch.onnx dynamo), onnxruntime-genai's float16 output."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest

from posexport import surgery
from posexport.errors import PosexportError
from posexport.surgery.doctor import reaching
from posexport.onnxgraph.graph import Graph
from posexport.verdicts import FeedCase, model_parity

import zoo
from zoo import exporters as ef
from . import surgery_fixtures as sf

pytest.importorskip("transformers")
LONG = [FeedCase(16), FeedCase(2100)]  # inside max_position_embeddings (64) and far past it
EXACT = 2e-5  # patched logits against float64 transformers


@functools.lru_cache(maxsize=None)
def folder(arch: str) -> Path:
    if arch == "phi3-longrope":  # LongRoPE switching at 64, max_position_embeddings 256
        return sf.tiny_phi3()
    return zoo.save_model(zoo.tiny_config(arch), sf.ROOT / f"x-{arch}")


@functools.lru_cache(maxsize=None)
def exported(arch: str, exporter: str) -> Path:
    try:
        return ef.EXPORTERS[exporter](folder(arch), sf.ROOT / f"x-{arch}-{exporter}")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


def patched(model: Path, values=None, position_limit: int | None = None) -> Path:
    out = model.parent / "patched" / "model.onnx"
    if not out.is_file():
        out.parent.mkdir(exist_ok=True)
        surgery.patch_file(model, out, values, position_limit)
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
    assert faults["float16-cache"]["this_exporter"] and "caches-cut-at-max-positions" not in faults  # 64 rows, as promised
    more = sf.promising(folder("mistral"), 4096)
    promising = surgery.doctor(model, surgery.requested_values(from_model=more), from_model=more)
    cut = next(f for f in promising["exporter_faults"] if f["fault"] == "caches-cut-at-max-positions")
    assert cut["value"] == 64 and "the caches hold 64 rows, the config promises 4096 positions" in cut["detail"]
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
    more = sf.promising(folder("qwen3"), 4096)
    report = surgery.doctor(model, surgery.requested_values(from_model=more), from_model=more)
    assert "MatMulNBits weights (int4)" in report["exporter"]["evidence"]
    assert {f["fault"] for f in report["exporter_faults"]} == {"caches-cut-at-max-positions"}
    # int4 against float64 transformers: its vocabulary read, every output compared, the tokens counted
    judged = model_parity(model, against_hf=folder("qwen3"), cases=[FeedCase(16)], runtimes=["ort-cpu"])
    assert not judged.not_compared and len(judged.results) == 5, judged
    logits = next(r for r in judged.results if r.output == "logits")
    assert logits.comparison is not None and logits.tokens.positions == 16
    out = tmp_path / "model.onnx"
    surgery.patch_file(model, out, surgery.requested_values(from_model=folder("qwen3")), 4096)
    caches = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer if "cache" in t.name}
    angles = np.arange(4096, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, 16, 2) / 16)
    assert np.max(np.abs(caches["cos_cache"].astype(np.float64) - np.cos(angles))) <= 6e-8  # float32 rounding of float64
    report = model_parity(out, model, cases=[FeedCase(16), FeedCase(2100)], runtimes=["ort-cpu"], tolerance=1e-5, outputs=["logits"])
    (inside,), (past,) = report.results, report.not_compared  # the original stops at 64: nothing to compare past it
    assert inside.status == "pass" and past.case == "prompt 2100" and "the reference fails" in past.reason


def stored_tables(model: Path) -> dict[str, np.ndarray]:
    return {t.name: onnx.numpy_helper.to_array(t, base_dir=str(model.parent)) for t in onnx.load(str(model)).graph.initializer
            if "cache" in t.name}


def float64_tables(inv_freq: np.ndarray, rows: int, factor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(rows, dtype=np.float64)[:, None] * inv_freq
    return factor * np.cos(angles), factor * np.sin(angles)


def against_transformers(fixed: Path, model: Path, arch: str, past: int) -> dict[str, str]:
    """Every output (logits, every layer's key and value cache) of the patched model within EXACT of float64
    transformers inside the trained length and at ``past`` tokens; how the original did there, by output."""
    report = model_parity(fixed, against_hf=folder(arch), cases=[FeedCase(16), FeedCase(past)], runtimes=["ort-cpu"],
                          tolerance=EXACT, original=model)
    assert report.passed and not report.not_compared and len(report.results) == 10, report  # logits and 2 × 2 caches
    return {r.output: r.original for r in report.results if r.case == f"prompt {past}"}


def test_mobius_gathered_caches_are_rebuilt_past_their_rows():
    model = exported("llama", "mobius")  # RotaryEmbedding reading Gather(cos_cache [64, 8], position_ids)
    (site,) = surgery.find(model)  # the Gathers are the caches' rows, not learned position tables
    assert site.kind == "rope-cache-gathered" and site.recovered["positions"] == "position_ids" and len(site.feeds) == 4
    assert site.recovered["rows"] == 64 and site.recovered["recognised"] == {"head_dim": 16, "base": 10000.0}
    values = surgery.requested_values(from_model=folder("llama"))
    assert surgery.doctor(model, values, from_model=folder("llama"))["exporter_faults"] == []  # 64 rows, as promised
    more = sf.promising(folder("llama"), 4096)
    report = surgery.doctor(model, surgery.requested_values(from_model=more), from_model=more)
    (cut,) = report["exporter_faults"]
    assert report["exporter"]["name"] == "mobius-onnx" and cut["fault"] == "caches-cut-at-max-positions"
    assert cut["value"] == 64 and cut["this_exporter"]
    with pytest.raises(PosexportError, match="the caches hold frequencies 1, 0.316228, .* not those of the default rope"):
        surgery.patch(model, [v | {"base": 1.01 * v["base"]} for v in values], 512)
    fixed = patched(model, values, 512)
    tables = stored_tables(fixed)
    cos, sin = float64_tables(10000.0 ** (-np.arange(0, 16, 2) / 16), 512)
    assert tables["model.rotary_emb.cos_cache"].shape == (512, 8)  # float32 rounding of float64 values
    assert max(np.abs(tables["model.rotary_emb.cos_cache"] - cos).max(), np.abs(tables["model.rotary_emb.sin_cache"] - sin).max()) <= 6e-8
    assert all(r.startswith("fails: indices element out of data bounds") for r in against_transformers(fixed, model, "llama", 300).values())


def test_mobius_longrope_table_of_both_regimes_is_rebuilt_in_both():
    model = exported("phi3-longrope", "mobius")  # short rows 0 … 63, then long rows, read at position_ids + 64·(max > 63)
    (site,) = surgery.find(model)
    assert site.kind == "rope-cache-gathered" and site.recovered["positions"] == "position_ids + 64·(max(position_ids) > 63)"
    assert (site.recovered["regime_switch"], site.recovered["short_rows"], site.recovered["rows"]) == (64, 64, 256)
    fixed = patched(model, surgery.requested_values(from_model=folder("phi3-longrope")), 512)
    table = stored_tables(fixed)["model.rotary_emb.cos_cache"]
    plain = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    factor = np.sqrt(1 + np.log(256 / 64) / np.log(64))  # Phi-3's attention factor, in both regimes
    short, _ = float64_tables(plain / np.array([1.0 + 0.1 * i for i in range(8)]), 64, factor)
    long, _ = float64_tables(plain / np.array([1.0 + 0.5 * i for i in range(8)]), 512, factor)
    assert table.shape == (576, 8) and np.abs(table - np.concatenate([short, long])).max() <= 1.2e-7
    original = against_transformers(fixed, model, "phi3-longrope", 300)  # 300 tokens: the long rows, past the old 256
    assert all(r.startswith("fails: indices element out of data bounds") for r in original.values())


def phi3_in_4x_spelling(source: Path) -> Path:
    """A copy of the Phi-3 folder whose config.json spells its rope as transformers 4.57 reads it (for
    optimum-onnx): rope_theta, and rope_scaling with exactly type, short_factor and long_factor."""
    out = source.with_name(source.name + "-4x")
    if not out.is_dir():
        shutil.copytree(source, out)
        config = json.loads((out / "config.json").read_text())
        rope = config.pop("rope_parameters")
        config |= {"rope_theta": rope["rope_theta"], "rope_scaling": {k: rope[k] for k in ("type", "short_factor", "long_factor")}}
        (out / "config.json").write_text(json.dumps(config))
    return out


def test_optimum_longrope_frozen_by_the_trace_gets_its_switch_back():
    try:  # TorchScript traced LongRoPE's length switch at a short example: the graph holds the short regime only
        model = ef.optimum(phi3_in_4x_spelling(folder("phi3-longrope")), sf.ROOT / "x-phi3-longrope-optimum")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))
    values = surgery.requested_values(from_model=folder("phi3-longrope"))
    (site,) = surgery.doctor(model, values, from_model=folder("phi3-longrope"))["sites"]
    frozen = {f["fault"]: f for f in site["faults"]}["longrope-frozen"]
    assert site["kind"] == "rope-matmul" and "holds its short regime only (no switch at length 64)" in frozen["detail"]
    assert frozen["value"] > 0.1  # cos/sin at position 128 of a long call
    wrong = [v | {"short_factor": [1.01 * f for f in v["short_factor"]]} for v in values]
    with pytest.raises(PosexportError, match="not those of the longrope rope asked for \\(short regime: .*; long regime: "):
        surgery.patch(model, wrong, 4096)
    original = against_transformers(patched(model, values, 4096), model, "phi3-longrope", 300)
    assert float(original["logits"]) > 0.1  # the frozen export, in the long regime


def test_mobius_caches_gathered_by_other_indices_are_refused_naming_why():
    model = onnx.load(str(exported("llama", "mobius")))  # external data loaded: the graph is edited in memory
    gathers = [n for n in model.graph.node if n.op_type == "Gather" and "rotary_emb" in n.input[0]]
    shifted = onnx.helper.make_node("Add", [gathers[0].input[1], "one"], ["shifted"], name="shift")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(1, np.int64), "one"))
    model.graph.node.insert(0, shifted)
    for gather in gathers:
        gather.input[1] = "shifted"  # row p + 1 for position p: not what the cache kinds can rebuild
    (site,) = surgery.find(model)
    assert site.kind == "rope-cache-gathered" and "by indices that are neither the position ids nor LongRoPE's" in site.recovered["caches"]
    with pytest.raises(PosexportError, match="RotaryEmbedding node .*: its cos/sin caches are rows gathered from model.rotary_emb.cos_cache"):
        surgery.patch(model)


# optimum's client, run by its own environment's python: greedy tokens after the prompt, as JSON
OPTIMUM_GENERATE = """
import json, sys, torch
from optimum.onnxruntime import ORTModelForCausalLM
model = ORTModelForCausalLM.from_pretrained(sys.argv[1])
ids = torch.tensor([json.loads(sys.argv[2])])
out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=int(sys.argv[3]), do_sample=False)
print(json.dumps(out[0, ids.shape[1]:].tolist()))
"""
PROMPT = [1, 5, 9, 14, 30, 2, 7, 11, 60, 42]


def greedy(source: Path, prompt: list[int], steps: int) -> list[int]:
    """transformers' own greedy generate (float32): the tokens after the prompt."""
    import torch
    from transformers import AutoModelForCausalLM

    ids = torch.tensor([prompt])
    out = AutoModelForCausalLM.from_pretrained(str(source)).eval().generate(ids, attention_mask=torch.ones_like(ids),
                                                                             max_new_tokens=steps, do_sample=False)
    return out[0, len(prompt):].tolist()


def test_a_patched_optimum_export_loads_in_ort_model_for_causal_lm_and_generates(tmp_path):
    model = exported("llama", "optimum")
    fixed = tmp_path / "fixed" / "model.onnx"
    surgery.patch_file(model, fixed, surgery.requested_values(from_model=folder("llama")))
    assert sorted(p.name for p in fixed.parent.iterdir()) == ["config.json", "generation_config.json", "model.onnx"]
    proc = subprocess.run([str(ef.OPTIMUM_PYTHON), "-c", OPTIMUM_GENERATE, str(fixed.parent), json.dumps(PROMPT), "8"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == greedy(folder("llama"), PROMPT, 8)
    assert surgery.doctor(fixed, surgery.requested_values(from_model=folder("llama")), from_model=folder("llama"))["faults"] == 0


def test_a_patched_transformers_export_loads_in_exported_model(tmp_path):
    """transformers' ExportedModel.from_pretrained reads export.json, which names the patched file."""
    from transformers.exporters.base import ExportedModel
    import torch

    model = exported("llama", "transformers-onnx")
    fixed = tmp_path / "fixed" / "patched.onnx"
    surgery.patch_file(model, fixed)
    manifest = json.loads((fixed.parent / "export.json").read_text())
    assert manifest["components"]["model"]["file"] == "patched.onnx" and (fixed.parent / "config.json").is_file()
    loaded = ExportedModel.from_pretrained(fixed.parent)
    ids = torch.tensor([PROMPT])
    for _ in range(8):
        logits = loaded(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=torch.arange(ids.shape[1])[None]).logits
        ids = torch.cat([ids, logits[:, -1:].argmax(-1)], dim=1)
    assert ids[0, len(PROMPT):].tolist() == greedy(folder("llama"), PROMPT, 8)
    assert surgery.doctor(fixed)["faults"] == 0
