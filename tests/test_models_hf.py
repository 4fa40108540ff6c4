"""Graphs built --from-model against the model's own code in transformers: through the `hf` runtime on the
parity sweep (positions 0…16, around the scaling's L0, 100000 and the limit), and directly against the
transformers modules. A misread (a full-rotary graph for Pythia) fails by orders of magnitude."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport import export, verdicts  # noqa: E402
from posexport.models import read_model  # noqa: E402
from posexport.errors import PosexportError  # noqa: E402
from posexport.models import cli as model_cli  # noqa: E402
from posexport.models.build import build_model, save_model  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402
from posexport.verdicts.runners import get_runtime  # noqa: E402
from posexport.models.oracle import Hf, model_bound  # noqa: E402

from zoo import ROPE, TRAINED, rope_models, trained_models  # noqa: E402
from .harness import normalised_error  # noqa: E402


@pytest.fixture(scope="session")
def zoo(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zoo")
    return {**rope_models(root), **trained_models(root)}


@pytest.fixture(scope="session")
def built(zoo):
    return {name: build_model(folder, backend="portable") for name, folder in zoo.items()}


ALL = [*ROPE, *TRAINED]


@pytest.mark.parametrize("name", ALL)
def test_every_graph_agrees_with_the_model_on_the_sweep(built, name):
    for b in built[name]:
        report = verdicts.run_parity(b.artifact, ["ort-cpu", Hf()], seqs=(17,), batches=(2,), properties=False)
        hf = [r for r in report.results if r.runtime == "hf"]
        assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]
        assert hf and all(r.status == "pass" for r in hf)


def rotate_with_transformers(folder: Path, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """LlamaRotaryEmbedding + apply_rotary_pos_emb on x [batch, seq, heads, dim], as the model calls them."""
    import torch
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    q = torch.from_numpy(x).transpose(1, 2)
    cos, sin = LlamaRotaryEmbedding(AutoConfig.from_pretrained(folder))(q, torch.from_numpy(positions))
    return apply_rotary_pos_emb(q, q, cos, sin)[0].transpose(1, 2).numpy()


@pytest.mark.parametrize("start", [0, 8192 - 9, 100_000])
def test_llama31_graph_equals_transformers_directly(zoo, built, start):
    """Positions 0…16, around L0 = 8192 and from 100000, one prefill each."""
    art = built["llama31"][0].artifact
    rng = np.random.default_rng(start)
    x = rng.standard_normal((2, 17, 4, 16)).astype(np.float32)
    positions = np.tile(np.arange(start, start + 17), (2, 1))
    ours = get_runtime("ort-cpu").load(art).run({"x": x, "position_ids": positions})
    theirs = rotate_with_transformers(zoo["llama31"], x, positions)
    exact = art.encoding.reference(art.params, {"x": x, "position_ids": positions})
    assert normalised_error(ours, exact) < art.options.dtype.bound(start + 16)
    assert normalised_error(ours, theirs.astype(np.float64)) < model_bound(0.0, start + 16)


def test_t5_graph_equals_compute_bias_directly(zoo, built):
    import torch
    from transformers import T5Model

    model = T5Model.from_pretrained(zoo["t5"]).eval()
    for b, stack in zip(built["t5"], (model.encoder, model.decoder)):
        scores = np.random.default_rng(0).standard_normal((1, 4, 5, 40)).astype(np.float32)
        ours = get_runtime("ort-cpu").load(b.artifact).run({"scores": scores})
        with torch.no_grad():
            bias = stack.block[0].layer[0].SelfAttention.compute_bias(5, 40, past_seen_tokens=35).numpy()
        assert normalised_error(ours, scores + bias) < 1e-6


def test_vit_graph_equals_vit_embeddings_directly(zoo, built):
    import torch
    from transformers import ViTModel

    embeddings = ViTModel.from_pretrained(zoo["vit"]).embeddings.eval()
    art = built["vit"][0].artifact
    rng = np.random.default_rng(0)
    x, cls = rng.standard_normal((1, 6, 3, 32)).astype(np.float32), rng.standard_normal((1, 1, 32)).astype(np.float32)
    tokens = torch.cat([torch.from_numpy(cls), torch.from_numpy(x).reshape(1, 18, 32)], dim=1)
    with torch.no_grad():
        theirs = (tokens + embeddings.interpolate_pos_encoding(tokens, 6 * 8, 3 * 8)).numpy()
    ours = get_runtime("ort-cpu").load(art).run({"x": x, "cls": cls})
    assert normalised_error(ours, theirs) < 1e-6


@pytest.fixture(scope="session")
def pythia_misread(zoo, tmp_path_factory) -> Path:
    """What --from-config made of Pythia before: every channel rotating."""
    art = export.build("rope", {"head_dim": 16, "heads": 4, "max_positions": 2048}, backend="portable")
    onnx_path, _ = export.save(art, tmp_path_factory.mktemp("misread"), "pythia-full-rotary")
    return onnx_path


def test_a_pythia_misread_fails_against_the_model_by_orders_of_magnitude(zoo, pythia_misread):
    report = run_model_parity(zoo["pythia"], pythia_misread, ["ort-cpu"], seqs=(17,), batches=(1,), properties=False)
    graph = [r for r in report.results if r.runtime == "ort-cpu"]
    model = {r.case: r for r in report.results if r.runtime == "hf"}
    assert all(r.status == "pass" for r in graph)  # the graph is what its manifest says…
    assert not report.passed  # …but not what the model does
    short = model["seq17-b1"].comparison
    assert short.normalised > 1000 * short.bound
    far = model[next(c for c in model if c.startswith("far@"))].comparison
    assert far.normalised > 10 * far.bound
    assert any(r.runtime == "hf vs ort-cpu" and r.status == "fail" for r in report.pairwise)


def test_pythia_built_from_the_folder_passes(zoo, built, tmp_path):
    (onnx_path, _), = save_model(built["pythia"], tmp_path)
    report = run_model_parity(zoo["pythia"], onnx_path, ["ort-cpu"], seqs=(17,), batches=(1,), properties=False)
    assert report.passed
    assert {r.runtime for r in report.pairwise} == {"hf vs ort-cpu"}


def cli(*args: str) -> int:
    from posexport_cli.main import main

    sys.argv = ["posexport", *args]
    try:
        main()
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_cli_build_and_parity_from_model(zoo, tmp_path):
    assert cli("build", "--from-model", str(zoo["gemma3"]), "--backend", "portable", "-o", str(tmp_path)) == 0
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == ["tiny-gemma3-rope-global.onnx", "tiny-gemma3-rope-local.onnx"]
    manifest = json.loads((tmp_path / "tiny-gemma3-rope-global.json").read_text())
    assert (manifest["model"]["role"], manifest["model"]["layers"]) == ("rope-global", [2, 5])
    graph = str(tmp_path / "tiny-gemma3-rope-global.onnx")
    assert cli("parity", "--from-model", str(zoo["gemma3"]), graph, "--runtimes", "ort-cpu", "--seqs", "17",
               "--batches", "1", "--no-properties", "--json", str(tmp_path / "report.json")) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert {r["runtime"] for r in report["results"]} == {"ort-cpu", "hf"}
    assert {r["runtime"] for r in report["pairwise"]} == {"hf vs ort-cpu"}


def test_build_lines_say_which_layers_use_which_graph(zoo, tmp_path):
    lines = model_cli.lines(model_cli.build(zoo["gemma3"], None, {}, tmp_path, None, backend="portable"))
    assert "  tiny-gemma3-rope-global: rope (rope-global) used by layers 2, 5" in lines
    assert "  tiny-gemma3-rope-local: rope (rope-local) used by layers 0-1, 3-4, 6" in lines
    with pytest.raises(PosexportError, match="--preset"):
        model_cli.build(zoo["gemma3"], None, {}, tmp_path, None, conflicts={"--preset": "phi-3"})


def test_cli_parity_from_model_fails_a_misread(zoo, pythia_misread):
    assert cli("parity", "--from-model", str(zoo["pythia"]), str(pythia_misread), "--runtimes", "ort-cpu",
               "--seqs", "17", "--batches", "1", "--no-properties") == 1


def test_cli_refuses_a_conflicting_encoding(zoo, tmp_path):
    assert cli("build", "--from-model", str(zoo["t5"]), "--encoding", "rope", "-o", str(tmp_path)) == 2
    assert not list(tmp_path.glob("*.onnx"))
    assert cli("build", "--from-model", str(zoo["t5"]), "--encoding", "t5", "-o", str(tmp_path)) == 0


def test_hf_says_why_it_cannot_judge_a_graph_without_a_model():
    art = export.build("rope", {"head_dim": 8, "heads": 1}, backend="portable")
    hf = get_runtime("hf")
    assert hf.available() == (True, "")
    ok, why = hf.supports(art)
    assert not ok and "--from-model" in why
    report = verdicts.run_parity(art, ["ort-cpu", "hf"], seqs=(1,), batches=(1,), properties=False)
    assert report.passed and "--from-model" in report.unavailable["hf"]


def test_a_graph_built_from_a_model_carries_it_for_runtimes_hf(built):
    art = built["llama31"][0].artifact
    assert "hf" not in [r.name for r in verdicts.resolve_runtimes(None)]  # it runs no graph
    report = verdicts.run_parity(art, ["ort-cpu", "hf"], seqs=(17,), batches=(1,), properties=False, pairwise=True)
    assert report.passed and "hf" in report.runtimes
    assert any(r.runtime == "hf vs ort-cpu" and r.status == "pass" for r in report.pairwise)


def test_plan_reads_every_zoo_model(zoo):
    for folder in zoo.values():
        assert read_model(folder).roles


@pytest.mark.parametrize("name", ["llama-3.1-8b", "phi-3-mini-128k-instruct", "qwen2.5-7b-instruct-yarn"])
def test_published_configs_agree_with_transformers(tmp_path, name):
    """Real sizes and scalings (head_dim 128, llama3 bands, Phi-3's 48 longrope factors, YaRN 4×): the
    graph and transformers' own rotary agree at 0…16, around L0 and at 100000."""
    from .test_models_read import preset_folder

    (b,) = build_model(preset_folder(tmp_path, name), None, {"heads": 2}, backend="portable")
    report = verdicts.run_parity(b.artifact, ["ort-cpu", Hf()], seqs=(17,), batches=(1,), properties=False)
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]


def test_hf_runs_only_transformers_code_from_a_local_folder(built):
    art = built["llama31"][0].artifact
    entry = art.manifest["model"]
    for bad, why in ((dict(entry, folder="meta-llama/Llama-3.1-8B"), "not here"),
                     (dict(entry, hf=dict(entry["hf"], module="os")), "not a transformers model module"),
                     (dict(entry, hf=dict(entry["hf"], rotary="system")), "not transformers position code")):
        ok, message = Hf(bad).supports(art)
        assert not ok and why in message


def test_swin_class_token_index_is_beits():
    from transformers.models.beit.modeling_beit import BeitRelativePositionBias

    from posexport.encodings.swin import relative_index

    for window in ((4, 4), (3, 5)):
        theirs = BeitRelativePositionBias.generate_relative_position_index(window).numpy()
        assert np.array_equal(relative_index(*window, class_token=True), theirs)


def test_the_documented_parity_from_model_passes_a_correct_graph_and_fails_a_wrong_base(zoo, tmp_path):
    """`posexport build --from-model DIR` then `posexport parity --from-model DIR GRAPH`, as the README
    writes them: every runtime, the graph's properties on the graph runtimes, the model's own code on hf."""
    folder = zoo["llama31"]
    assert cli("build", "--from-model", str(folder), "-o", str(tmp_path)) == 0
    (graph,) = tmp_path.glob("*.onnx")
    assert cli("parity", "--from-model", str(folder), str(graph), "--json", str(tmp_path / "report.json")) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert "hf" in report["runtimes"] and report["properties"]
    assert "hf" not in {p["runtime"] for p in report["properties"]}
    base = json.loads(graph.with_suffix(".json").read_text())["params"]["base"]
    wrong = tmp_path / "wrong"
    assert cli("build", "--from-model", str(folder), "--base", str(base * 1.01), "-o", str(wrong)) == 0
    (wrong_graph,) = wrong.glob("*.onnx")
    assert cli("parity", "--from-model", str(folder), str(wrong_graph), "--json", str(wrong / "report.json")) == 1
    failing = {r["runtime"] for r in json.loads((wrong / "report.json").read_text())["results"] if r["status"] != "pass"}
    assert failing == {"hf"}  # the graph is what its manifest says, but not what the model does
