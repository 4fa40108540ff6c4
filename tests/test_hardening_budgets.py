"""Budgets on what is allocated, not on file bytes (issue 33, class E), and the tracebacks of class F that
are about inputs: every overflow is one `error:` line (or, for a runtime's outputs, a failed row) naming the
value and the POSEXPORT_MAX_BYTES budget, said before anything is allocated; sparse tensors, 0-row
vocabularies, negative seeds and past lengths, NUL bytes and a pickle under --against-hf are one line."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from .test_hardening_isolation import gqa_decoder
from .test_hardening_writes import one_error
from .test_parity_cli import cli

torch = pytest.importorskip("torch")


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "8M")


def learned(weights: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return cli("build", "--encoding", "learned", "--weights", str(weights), *extra, "--out", str(out))


# --- weights: the dtype allocated, after widening; .pt archives before loading ------------------------


def test_an_int8_table_is_budgeted_as_the_float64_it_becomes(small_budget, tmp_path):
    np.save(tmp_path / "t.npy", np.ones((262144, 8), np.int8))  # 2 MiB on disk, 18 MiB read and widened
    line = one_error(*learned(tmp_path / "t.npy", tmp_path / "out"), f"--weights {tmp_path / 't.npy'}")
    assert "int8 values [262144, 8], read and widened to float64, would take about 18 MiB, over the 8 MiB limit" in line, line
    assert "POSEXPORT_MAX_BYTES" in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize("make, needle", [
    # 1.6 KB on disk, a [2^20, 2^20] view of one number: 12 TiB as float32 then float64
    (lambda: {"t": torch.zeros(1).expand(1 << 20, 1 << 20)}, "float32 values [1048576, 1048576], read and widened to float64, would take about 12 TiB"),
    (lambda: {"t": torch.eye(4).to_sparse()}, "tensor 't' is sparse_coo, not a dense tensor"),
], ids=["zero stride", "sparse"])
def test_pt_tensors_are_checked_on_the_meta_device_before_loading(tmp_path, make, needle):
    torch.save(make(), tmp_path / "w.pt")
    line = one_error(*learned(tmp_path / "w.pt", tmp_path / "out", "--key", "t"), needle)
    assert f"--weights {tmp_path / 'w.pt'}" in line


def test_a_deflated_pt_archive_is_budgeted_by_its_uncompressed_members(small_budget, tmp_path):
    saved = io.BytesIO()
    torch.save({"t": torch.zeros(16 << 20, dtype=torch.uint8)}, saved)
    with zipfile.ZipFile(io.BytesIO(saved.getvalue())) as plain, zipfile.ZipFile(tmp_path / "bomb.pt", "w", zipfile.ZIP_DEFLATED) as bomb:
        for info in plain.infolist():
            bomb.writestr(info.filename, plain.read(info.filename))
    assert (tmp_path / "bomb.pt").stat().st_size < 100_000
    one_error(*learned(tmp_path / "bomb.pt", tmp_path / "out", "--key", "t"), "archive member(s) takes 16 MiB, over the 8 MiB limit")


def test_a_strided_view_past_its_storage_is_refused(tmp_path):
    """A pickle may declare any size and strides for a storage: reaching past it is refused (by torch, on the
    meta device, before anything is read), in one line."""
    torch.save({"t": torch.zeros(4, 8)}, tmp_path / "w.pt")
    with zipfile.ZipFile(tmp_path / "w.pt") as archive:
        members = {info.filename: archive.read(info.filename) for info in archive.infolist()}
    pickle_name = next(name for name in members if name.endswith("data.pkl"))
    members[pickle_name] = members[pickle_name].replace(b"K\x04K\x08\x86", b"K\x04K\x09\x86")  # shape (4, 8) -> (4, 9)
    with zipfile.ZipFile(tmp_path / "past.pt", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    one_error(*learned(tmp_path / "past.pt", tmp_path / "out", "--key", "t"), "cannot read it as a torch checkpoint")


# --- whole models: feeds and outputs -------------------------------------------------------------------


def identity(path: Path, dims: list, out: str = "y", node: onnx.NodeProto | None = None,
             initializers: list | None = None) -> Path:
    graph = oh.make_graph([node or oh.make_node("Identity", ["x"], [out])], "g", [oh.make_tensor_value_info("x", 1, dims)],
                          [oh.make_tensor_value_info(out, 1, None)], initializers or [])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), str(path))
    return path


def parity(model: Path, *extra: str) -> tuple[int, str, str]:
    return cli("model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu", *extra)


def test_feeds_past_the_budget_are_refused_before_any_is_made(tmp_path):
    huge = identity(tmp_path / "fixed.onnx", [1 << 20, 1 << 20, 2])  # fixed-size inputs of 8 TiB
    one_error(*parity(huge), "--prompt 16: its feeds (input 'x' alone [1048576, 1048576, 2] of float32)")
    good = tmp_path / "good.onnx"
    onnx.save(gqa_decoder(False), str(good))
    line = one_error(*parity(good, "--prompt", str(10 ** 12)), "--prompt 1000000000000: its feeds")
    assert "over the 2 GiB limit on what posexport allocates (set POSEXPORT_MAX_BYTES to raise it)" in line
    one_error(*parity(good, "--past", str(10 ** 12)), "--past 1000000000000: its feeds")


def test_outputs_past_the_budget_are_a_failed_row_and_the_budget_applies_to_them(monkeypatch, tmp_path):
    """A runtime's outputs are refused by their declared shapes before this process allocates them."""
    model = identity(tmp_path / "big.onnx", ["batch", "seq"], node=oh.make_node(
        "ConstantOfShape", ["shape"], ["y"], value=onh.from_array(np.array([1.0], np.float32))),
        initializers=[onh.from_array(np.array([1 << 20], np.int64), "shape")])  # 4 MiB of float32, 12 MiB with float64
    code, out, err = parity(model, "--json", str(tmp_path / "ok.json"))
    assert code == 0, out + err
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "8M")
    code, out, err = parity(model, "--json", str(tmp_path / "r.json"))
    assert code == 1 and "Traceback" not in out + err, out + err
    (row,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert "its outputs ('y' alone [1048576] of float32), held and widened to float64 for the comparison, would take about 12 MiB, " \
           "over the 8 MiB limit" in row["message"], row


# --- class F: tracebacks that are one line now ---------------------------------------------------------


def test_seed_and_past_out_of_range_are_one_line_and_a_0_row_vocabulary_a_failed_row(tmp_path):
    good = tmp_path / "good.onnx"
    onnx.save(gqa_decoder(False), str(good))
    one_error(*parity(good, "--seed", "-1"), "--seed")
    one_error(*parity(good, "--past", "-5"), "--past")
    model = gqa_decoder(False)
    embed = next(t for t in model.graph.initializer if t.name == "embed")
    embed.CopyFrom(onh.from_array(np.zeros((0, 32), np.float32), "embed"))
    onnx.save(model, str(tmp_path / "empty.onnx"))
    code, out, err = parity(tmp_path / "empty.onnx", "--json", str(tmp_path / "r.json"))  # ids drawn below the logits' 32
    assert code == 1 and "Traceback" not in out + err, out + err
    (row,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert row["status"] == "error" and row["message"].startswith("the model fails"), row


def test_a_nul_byte_in_an_external_data_location_is_one_line(tmp_path):
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[2])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="model.onnx\x00.data")
    graph = oh.make_graph([oh.make_node("Identity", ["w"], ["y"])], "g", [], [oh.make_tensor_value_info("y", 1, [2])], [tensor])
    onnx.save(oh.make_model(graph), str(tmp_path / "model.onnx"))
    (tmp_path / "model.onnx.data").write_bytes(bytes(8))
    for args in (["doctor", str(tmp_path / "model.onnx")], ["patch", str(tmp_path / "model.onnx"), "--out", str(tmp_path / "o.onnx")],
                 ["model-parity", "--model", str(tmp_path / "model.onnx"), "--against", str(tmp_path / "model.onnx")]):
        one_error(*cli(*args), "holds a NUL byte")


def test_a_pickle_that_needs_code_under_against_hf_is_one_line(tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "hf"
    transformers.LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                             num_key_value_heads=1, max_position_embeddings=64).save_pretrained(folder)

    class Payload:
        def __reduce__(self):  # noqa: ANN204
            return (print, ("never printed",))

    torch.save({"model.embed_tokens.weight": Payload()}, folder / "pytorch_model.bin")
    model = tmp_path / "m.onnx"
    onnx.save(gqa_decoder(False), str(model))
    code, out, err = cli("model-parity", "--model", str(model), "--against-hf", str(folder), "--runtimes", "ort-cpu")
    assert "never printed" not in out + err
    one_error(code, out, err, "a checkpoint is a pickle that needs code to load it, which posexport never runs")


def test_saved_outputs_that_declare_more_than_they_hold_or_inflate_past_the_budget_are_one_line(monkeypatch, tmp_path):
    code, out, err = cli("build", "--encoding", "rope", "--head-dim", "8", "--heads", "2", "--out", str(tmp_path / "g"))
    assert code == 0, out + err
    run = ["parity", str(tmp_path / "g" / "rope.onnx"), "--runtimes", "ort-cpu", "--seqs", "3", "--no-properties"]
    index = io.BytesIO()
    np.save(index, np.array(json.dumps({"digests": {}, "graphs": {}, "outputs": [["g", "c", "r"]]})))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (1 << 45,)})  # 256 TiB
    with zipfile.ZipFile(tmp_path / "lie.npz", "w") as archive:
        archive.writestr("index.npy", index.getvalue())
        archive.writestr("out0.npy", header.getvalue() + bytes(64))
    one_error(*cli(*run, "--load-outputs", str(tmp_path / "lie.npz")), "member 'out0.npy' declares [35184372088832] of float64")
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("index.npy", index.getvalue())
        archive.writestr("out0.npy", bytes(16 << 20))  # 16 KiB deflated
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "8M")
    one_error(*cli(*run, "--load-outputs", str(tmp_path / "bomb.npz")), "archive member(s) takes 16 MiB, over the 8 MiB limit")
