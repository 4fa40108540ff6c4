"""Errors that lead somewhere: each message that once pointed users the wrong way (issue 32) names what they most
likely meant, and the right input still works."""

from __future__ import annotations

import shutil

import pytest

from . import surgery_fixtures as sf
from .test_parity_cli import cli

GRAPH = ["--head-dim", "8", "--heads", "2"]


def one_error(code: int, err: str) -> str:
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture(scope="module")
def exported():
    return sf.torch_export(sf.tiny_llama("torch-default", "default"))


@pytest.fixture
def built(tmp_path):
    code, out, err = cli("build", *GRAPH, "--out", str(tmp_path / "graphs"))
    assert code == 0, out + err
    return tmp_path / "graphs" / "rope.onnx"


def test_parity_on_an_exported_model_points_at_doctor_and_model_parity(exported, built):
    err = one_error(*cli("parity", str(exported))[::2])
    assert "an exported model (pytorch), not a graph `posexport build` wrote" in err
    assert f"posexport doctor {exported}" in err and f"posexport model-parity --model {exported} --against" in err
    assert "rebuild" not in err
    assert cli("parity", str(built), "--runtimes", "ort-cpu", "--seqs", "17")[0] == 0  # a built graph is checked


def test_parity_on_a_built_graph_without_its_manifest_says_rebuild(built):
    built.with_suffix(".json").unlink()
    assert "no manifest rope.json beside it; rebuild the graph with `posexport build`" in one_error(*cli("parity", str(built))[::2])


def test_parity_on_a_folder_names_the_model_option_or_a_graph_in_it(tmp_path, built):
    model = shutil.copytree(sf.tiny_llama("torch-default", "default"), tmp_path / "llama")
    assert f"a model folder: its encodings are built and checked with `--from-model {model}`" in one_error(*cli("parity", str(model))[::2])
    assert f"a folder; name a graph in it, e.g. {built}" in one_error(*cli("parity", str(built.parent))[::2])


def test_parity_on_a_text_file_says_what_it_takes(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# not a graph\n")
    err = one_error(*cli("parity", str(readme))[::2])
    assert "not an ONNX model; expected a graph `posexport build` wrote (NAME.onnx, its manifest NAME.json beside it)" in err


def test_a_singular_runtime_option_is_answered_with_the_plural(built):
    err = one_error(*cli("parity", str(built), "--runtime", "ort-cpu")[::2])
    assert err.startswith("error: --runtime: encoding options go with --encoding, not with a built GRAPH; did you mean --runtimes?")
    err = one_error(*cli("parity", str(built), "--head-dim", "8")[::2])  # a real encoding option: no guess
    assert "encoding options go with --encoding" in err and "did you mean" not in err


def test_a_scaling_without_its_factor_names_the_option_and_an_example(tmp_path):
    err = one_error(*cli("build", *GRAPH, "--scaling", "yarn", "--out", str(tmp_path))[::2])
    assert "--scaling yarn needs --factor (not given), e.g. --factor 8" in err and "None" not in err
    err = one_error(*cli("build", *GRAPH, "--scaling", "llama3", "--factor", "8", "--out", str(tmp_path))[::2])
    assert "--scaling llama3 needs --original-max-positions (not given)" in err
    assert cli("build", *GRAPH, "--scaling", "yarn", "--factor", "4", "--out", str(tmp_path))[0] == 0


def test_out_names_a_folder_for_build_and_a_file_for_patch(tmp_path, exported):
    err = one_error(*cli("build", *GRAPH, "--out", str(tmp_path / "graphs" / "mine.onnx"))[::2])
    assert f"--out is the folder the graph and its manifest go in, not a file; to name the file, give --out {tmp_path / 'graphs'} --name mine" in err
    assert not (tmp_path / "graphs").exists()
    (tmp_path / "fixed").mkdir()
    err = one_error(*cli("patch", str(exported), "--out", str(tmp_path / "fixed"))[::2])
    assert f"--out {tmp_path / 'fixed'}: a folder; --out names the file to write, e.g. {tmp_path / 'fixed' / 'FILE'}" in err


def test_model_parity_of_models_with_other_inputs_says_against_is_the_model_before_a_change(exported, built):
    err = one_error(*cli("model-parity", "--model", str(exported), "--against", str(built))[::2])
    assert "takes x, which --model's feeds lack (input_ids, attention_mask, position_ids)" in err
    assert f"a graph `posexport build` wrote is checked with `posexport parity {built}`" in err
