"""What a command writes and what it shows (issue 33, classes A, B, G, H and I): no report, saved output or
model is written over a file the command reads; a Hugging Face cache layout never switches containment
off; a folder swapped between the check and the read is refused; terminal, JUnit and Markdown views
escape what they show; composites are capped. Every refusal is one `error:` line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import xml.sax
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from posexport import guarded
from posexport.errors import PosexportError

from .test_hardening_isolation import gqa_decoder
from .test_hardening_surgery import SECRET, snapshot
from .test_parity_cli import cli


def one_error(code: int, out: str, err: str, needle: str = "") -> str:
    """The CLI's one error line (exit 2, no traceback), holding ``needle``."""
    assert code == 2 and "Traceback" not in out + err, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    return lines[0]


@pytest.fixture(scope="module")
def genai_like(tmp_path_factory) -> Path:
    """A GroupQueryAttention decoder with its weights in model.onnx.data, a genai_config.json naming it and a
    tokenizer beside it: every kind of file a command reads, or that its input references."""
    folder = tmp_path_factory.mktemp("m")
    onnx.save(gqa_decoder(False), str(folder / "model.onnx"), save_as_external_data=True, location="model.onnx.data", size_threshold=256)
    (folder / "genai_config.json").write_text(json.dumps({"model": {"context_length": 64, "decoder": {"filename": "model.onnx"}}}))
    (folder / "tokenizer.json").write_text("{}")
    return folder / "model.onnx"


@pytest.fixture(scope="module")
def rope_graph(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("graph")
    code, out, err = cli("build", "--encoding", "rope", "--head-dim", "8", "--heads", "2", "--out", str(folder))
    assert code == 0, out + err
    return folder / "rope.onnx"


# --- A: every file a command writes goes through the writer's overlap rule ---------------------------


def model_parity(model: Path) -> list[str]:
    """model-parity of the model against itself (random ids: the folder's tokenizer.json is a stand-in)."""
    return ["model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu", "--prompt", "4", "--random-ids"]


@pytest.mark.parametrize("command, option, target", [
    ("doctor", "--json", "model.onnx.data"),  # the repro: the model no longer loaded
    ("doctor", "--markdown", "model.onnx"),
    ("doctor", "--json", "tokenizer.json"),  # a file of the genai folder the model is in
    ("model-parity", "--junit", "genai_config.json"),
    ("model-parity", "--markdown", "model.onnx.data"),
    ("bench", "--json", "model.onnx.data"),
])
def test_a_report_over_an_input_or_a_file_it_references_is_refused(genai_like, tmp_path, command, option, target):
    folder = tmp_path / "m"
    folder.mkdir()
    for f in genai_like.parent.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    model, before = folder / "model.onnx", snapshot(folder)
    args = {"doctor": ["doctor", str(model)], "model-parity": model_parity(model),
            "bench": ["bench", "--model", str(model), "--against", str(model), "--seqs", "4", "--decode-positions", "4",
                      "--warmup", "0", "--repeats", "3"]}[command]
    one_error(*cli(*args, option, str(folder / target)), f"{option} {folder / target}: is a file this command reads")
    assert snapshot(folder) == before


def test_links_to_inputs_and_one_file_named_twice_are_refused(genai_like, tmp_path):
    os.symlink(genai_like.parent / "model.onnx.data", tmp_path / "via-symlink.json")
    os.link(genai_like.parent / "model.onnx.data", tmp_path / "hard-link.json")
    before = snapshot(genai_like.parent)
    for name in ("via-symlink.json", "hard-link.json"):
        one_error(*cli("doctor", str(genai_like), "--json", str(tmp_path / name)), "is a file this command reads")
    one_error(*cli(*model_parity(genai_like), "--json", str(tmp_path / "r"), "--markdown", str(tmp_path / "r")),
              f"--markdown {tmp_path / 'r'}: --json writes that file too")
    assert snapshot(genai_like.parent) == before and not (tmp_path / "r").exists()
    code, out, err = cli("doctor", str(genai_like), "--json", str(tmp_path / "report.json"))  # a new file: written
    assert code == 0 and json.loads((tmp_path / "report.json").read_text())["model"] == str(genai_like), out + err


def test_parity_reports_saved_outputs_and_built_graphs_never_overwrite_their_inputs(rope_graph, tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    for f in rope_graph.parent.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    graph, before = folder / "rope.onnx", snapshot(folder)
    run = ["parity", str(graph), "--runtimes", "ort-cpu", "--seqs", "3", "--no-properties"]
    one_error(*cli(*run, "--junit", str(graph)), "is a file this command reads")
    one_error(*cli(*run, "--save-outputs", str(folder / "rope.json")), "--save-outputs")  # the manifest
    # build's own files: a config read with --from-config is not overwritten by the manifest of the same name
    (folder / "llama.json").write_text(json.dumps({"num_attention_heads": 2, "hidden_size": 16, "max_position_embeddings": 64}))
    before = snapshot(folder)
    one_error(*cli("build", "--from-config", str(folder / "llama.json"), "--out", str(folder), "--name", "llama"),
              f"--out {folder / 'llama.json'}: is a file this command reads")
    assert snapshot(folder) == before


# --- B: a Hugging Face cache layout is checked structurally ------------------------------------------


def cache_with_blobs(root: Path, blobs: str | None) -> Path:
    """``root``/snapshots/r/, with ``root``/blobs a symlink to ``blobs`` (None: a real folder)."""
    (root / "snapshots" / "r").mkdir(parents=True)
    if blobs is None:
        (root / "blobs").mkdir()
    else:
        os.symlink(blobs, root / "blobs")
    return root / "snapshots" / "r"


def pointing_at(model: Path, location: str, nbytes: int) -> None:
    """A model whose one initializer (float32, nbytes/4 values) lives in external data at ``location``."""
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[nbytes // 4])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    graph = oh.make_graph([oh.make_node("Identity", ["w"], ["y"])], "g", [], [oh.make_tensor_value_info("y", 1, [nbytes // 4])], [tensor])
    onnx.save(oh.make_model(graph), str(model))


def test_blobs_as_a_symlink_to_the_root_counts_as_outside(tmp_path):
    """The issue's layout: `mkdir -p C/snapshots/r; ln -s / C/blobs`, and a location ../../blobs/<any path>."""
    secret = tmp_path / "SECRET"
    secret.write_text(SECRET[:32])
    snap = cache_with_blobs(tmp_path / "C", "/")
    pointing_at(snap / "model.onnx", f"../../blobs{secret}", 32)
    with pytest.raises(PosexportError, match="outside"):
        guarded.external_data(guarded.load_model(snap / "model.onnx"), snap / "model.onnx")
    one_error(*cli("doctor", str(snap / "model.onnx")), "outside")
    one_error(*cli("patch", str(snap / "model.onnx"), "--out", str(tmp_path / "O" / "fixed.onnx")), "outside")
    assert not (tmp_path / "O").exists()
    # --weights and extend through the same layout
    np.save(tmp_path / "t.npy", np.random.default_rng(0).standard_normal((8, 4)))
    os.symlink(f"../../blobs{tmp_path / 't.npy'}", snap / "t.npy")
    one_error(*cli("build", "--encoding", "learned", "--weights", str(snap / "t.npy"), "--out", str(tmp_path / "o")), "outside")
    one_error(*cli("extend", str(snap / "t.npy"), "--to", "12", "--out", str(tmp_path / "o")), "outside")


@pytest.mark.parametrize("layout", ["blobs elsewhere", "a folder in blobs", "a blob in a subfolder"])
def test_other_cache_shapes_count_as_outside_and_the_hub_layout_is_read(tmp_path, layout):
    np.save(tmp_path / "t.npy", np.random.default_rng(0).standard_normal((8, 4)))
    if layout == "blobs elsewhere":
        (tmp_path / "elsewhere").mkdir()
        os.replace(tmp_path / "t.npy", tmp_path / "elsewhere" / "abc")
        snap = cache_with_blobs(tmp_path / "C", str(tmp_path / "elsewhere"))
        target = "../../blobs/abc"
    else:
        snap = cache_with_blobs(tmp_path / "C", None)
        sub = tmp_path / "C" / "blobs" / "sub"
        sub.mkdir()
        os.replace(tmp_path / "t.npy", sub / "abc")
        target = "../../blobs/sub" if layout == "a folder in blobs" else "../../blobs/sub/abc"
    os.symlink(target, snap / "t.npy")
    with pytest.raises(PosexportError, match="outside"):
        guarded.read_bytes("t.npy", root=snap)
    if layout != "blobs elsewhere":  # the hub's own layout: a regular file directly in a real blobs/ folder
        (tmp_path / "C" / "blobs" / "0123").write_bytes(b"0123")
        os.symlink("../../blobs/0123", snap / "ok.bin")
        assert guarded.read_bytes("ok.bin", root=snap) == b"0123"


# --- I: a folder swapped for a symlink between the check and the read -------------------------------


def test_a_data_folder_swapped_after_the_check_is_refused_not_read(tmp_path, monkeypatch):
    """The timed swap of the sweep, made deterministic: the data folder becomes a symlink to a folder
    outside (holding a file of the same name and size) right after the locations are checked."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "w.bin").write_bytes(SECRET[:32].encode())
    model = tmp_path / "m" / "model.onnx"
    (tmp_path / "m" / "data").mkdir(parents=True)
    (tmp_path / "m" / "data" / "w.bin").write_bytes(bytes(32))
    pointing_at(model, "data/w.bin", 32)
    checked = guarded.external_data

    def check_then_swap(*args):  # noqa: ANN002, ANN202
        found = checked(*args)
        os.rename(tmp_path / "m" / "data", tmp_path / "m" / "was-data")
        os.symlink(tmp_path / "outside", tmp_path / "m" / "data")
        return found

    monkeypatch.setattr(guarded, "external_data", check_then_swap)
    with pytest.raises(PosexportError, match="outside"):
        guarded.read_external_data(guarded.load_model(model), model)


def test_a_file_swapped_between_its_check_and_its_open_is_refused_on_the_descriptor(tmp_path, monkeypatch):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "w.bin").write_bytes(SECRET.encode())
    (tmp_path / "m" / "data").mkdir(parents=True)
    (tmp_path / "m" / "data" / "w.bin").write_bytes(bytes(len(SECRET)))
    contained = guarded.inside

    def check_then_swap(root, path):  # noqa: ANN001, ANN202
        target = contained(root, path)
        os.rename(tmp_path / "m" / "data", tmp_path / "m" / "was-data")
        os.symlink(tmp_path / "outside", tmp_path / "m" / "data")
        return target

    monkeypatch.setattr(guarded, "inside", check_then_swap)
    with pytest.raises(PosexportError, match="changed while being opened"):
        guarded.read_bytes("data/w.bin", root=tmp_path / "m")


# --- G: renderers escape what they show ----------------------------------------------------------------

HOSTILE_NAME = "y\x1b[2J\x1b]0;pwned\x07 | cell\nrow <script>alert(1)</script> & \x00\x08\x9b"


def named_output(path: Path, negate: bool) -> Path:
    """x → Identity (or Neg) → an output whose name holds terminal escapes, a pipe, a newline, HTML and bytes XML forbids."""
    graph = oh.make_graph([oh.make_node("Neg" if negate else "Identity", ["x"], [HOSTILE_NAME])], "g",
                          [oh.make_tensor_value_info("x", 1, ["batch", "seq"])], [oh.make_tensor_value_info(HOSTILE_NAME, 1, ["batch", "seq"])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), str(path))
    return path


def test_terminal_junit_and_markdown_escape_names_from_the_model(tmp_path):
    model, against = named_output(tmp_path / "m.onnx", False), named_output(tmp_path / "a.onnx", True)
    code, out, err = cli("model-parity", "--model", str(model), "--against", str(against), "--runtimes", "ort-cpu", "--prompt", "3",
                         "--junit", str(tmp_path / "r.xml"), "--markdown", str(tmp_path / "r.md"), "--details")
    assert code == 1 and "Traceback" not in out + err, out + err
    assert "pwned" in out and not any(c in out + err for c in "\x1b\x07\x00\x08\x9b"), repr(out)
    xml.sax.parseString((tmp_path / "r.xml").read_bytes(), xml.sax.ContentHandler())  # well-formed, or it raises
    assert "\\x1b[2J" in (tmp_path / "r.xml").read_text()  # escaped, still readable
    markdown = (tmp_path / "r.md").read_text()
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown and "\x1b" not in markdown
    for table in markdown.split("\n\n"):
        rows = [line for line in table.splitlines() if line.startswith("|")]
        cells = {len(line.replace("\\|", "").split("|")) for line in rows}
        assert len(cells) <= 1, table  # every row of a table has the header's cells: none broken by a | or a newline


def test_doctor_shows_a_model_file_name_without_its_escapes(tmp_path):
    model = named_output(tmp_path / "m\x1b]0;title\x07\x1b[2J.onnx", False)
    code, out, err = cli("doctor", str(model), "--markdown", str(tmp_path / "d.md"))
    assert code == 0 and "title" in out and "\x1b" not in out + err + (tmp_path / "d.md").read_text(), repr(out)


# --- H: caps on composite parts -------------------------------------------------------------------------

GPT2 = {"model_type": "gpt2", "n_positions": 8, "n_embd": 4, "n_head": 1}


def nested(depth: int, kind: str = "encoder-decoder") -> dict:
    if depth == 0:
        return GPT2
    parts = {"encoder-decoder": ("encoder", "decoder"), "blt": ("patcher_config", "encoder_config", "global_config", "decoder_config")}[kind]
    return {"model_type": kind, **{part: nested(depth - 1, kind) for part in parts}}


@pytest.mark.parametrize("config, needle", [
    (nested(10), "nested past 4 levels"),  # 1,024 parts: 2,048 files written before the cap
    ({"model_type": "encoder-decoder", "encoder": nested(4), "decoder": GPT2}, "composite part 'encoder."),
    ({"model_type": "encoder-decoder", "encoder": {"model_type": ["gpt2"]}, "decoder": GPT2}, "encoder.model_type"),
    ({"model_type": "encoder-decoder", "encoder": GPT2, "decoder": {"model_type": {"a": 1}}}, "decoder.model_type"),
])
def test_composites_past_the_caps_or_of_no_type_are_refused_by_name(tmp_path, config, needle):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    one_error(*cli("build", "--from-model", str(tmp_path / "m"), "--out", str(tmp_path / "out")), needle)
    assert not (tmp_path / "out").exists()


def test_blt_nested_three_deep_passes_the_count_of_parts(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(nested(3, "blt")))  # 4 + 16 + 64 parts
    one_error(*cli("build", "--from-model", str(tmp_path / "m"), "--out", str(tmp_path / "out")), "past 32 parts in all")
