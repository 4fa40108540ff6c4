"""--weights through posexport.guarded (issue 18): a weights file stays inside its folder, is a regular
file within the byte budget, declares sizes its bytes hold (an .npy header's shape × dtype, a safetensors
header's byte ranges) before anything is allocated, and is never a pickle that runs. Every refusal is one
`error:` line naming the file, exit 2, and nothing is written."""

from __future__ import annotations

import io
import json
import os
import struct
from pathlib import Path

import numpy as np
import onnx
import pytest

from posexport.weights import load_table

from .test_hardening_input import one_error
from .test_hardening_surgery import SECRET
from .test_parity_cli import cli

ROWS, COLS = 8, 4


def table() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((ROWS, COLS))


def build(weights: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return cli("build", "--encoding", "learned", "--max-positions", str(ROWS), "--d-model", str(COLS), "--weights", str(weights),
               *extra, "--out", str(out))


def refused(weights: Path, out: Path, needle: str, *extra: str) -> str:
    line = one_error(*build(weights, out, *extra))
    assert f"--weights {weights}" in line and needle in line, line
    assert not out.exists() or not any(out.iterdir())  # nothing half-written
    return line


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def test_tables_read_through_the_checks_are_the_files_values(tmp_path):
    """Big-endian, Fortran-order .npy; float32 and bfloat16 safetensors; a Hugging Face cache's symlinked blob."""
    t = table()
    np.save(tmp_path / "f.npy", np.asfortranarray(t.astype(">f8")))
    assert np.array_equal(load_table(str(tmp_path / "f.npy"), None, (ROWS, COLS)), t)
    f32 = t.astype(np.float32)
    bf16 = (f32.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bfloat16's bits
    spans = {"a": ("F32", f32.tobytes()), "b": ("BF16", bf16.tobytes())}
    header, offset = {}, 0
    for name, (dtype, data) in spans.items():
        header[name] = {"dtype": dtype, "shape": [ROWS, COLS], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    (tmp_path / "t.safetensors").write_bytes(safetensors_bytes(header, b"".join(d for _, d in spans.values())))
    assert np.abs(load_table(str(tmp_path / "t.safetensors"), "a", (ROWS, COLS)) - t).max() <= 1e-7 * np.abs(t).max()
    assert np.abs(load_table(str(tmp_path / "t.safetensors"), "b", (ROWS, COLS)) - t).max() <= 2 ** -7 * np.abs(t).max()
    blobs, snapshot = tmp_path / "cache" / "blobs", tmp_path / "cache" / "snapshots" / "abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    with open(blobs / "0123", "wb") as f:  # a blob has no suffix
        np.save(f, t)
    os.symlink("../../blobs/0123", snapshot / "wpe.npy")
    code, out, err = build(snapshot / "wpe.npy", tmp_path / "out")
    assert code == 0, out + err
    onnx.checker.check_model(str(tmp_path / "out" / "learned.onnx"))


def test_a_weights_file_that_resolves_outside_its_folder_is_refused(tmp_path):
    (tmp_path / "outside").mkdir()
    np.save(tmp_path / "outside" / "secret.npy", table())
    (tmp_path / "in").mkdir()
    os.symlink(tmp_path / "outside" / "secret.npy", tmp_path / "in" / "w.npy")
    refused(tmp_path / "in" / "w.npy", tmp_path / "out", "outside")
    assert "outside" in one_error(*cli("extend", str(tmp_path / "in" / "w.npy"), "--to", "12", "--out", str(tmp_path / "ext")))
    assert not (tmp_path / "ext").exists()


def test_a_fifo_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "w.npy")
    refused(tmp_path / "w.npy", tmp_path / "out", "is a FIFO, not a regular file")


@pytest.mark.parametrize("change, needle", [
    (lambda data: data[:-8], "bytes follow the header"),  # truncated: one float short
    (lambda data: data + b"\0" * 8, "bytes follow the header"),
    (lambda data: data[:20], "not an .npy file"),
    (lambda data: b"\x93NUMPY\x03\x00" + data[8:], "format version 3.0"),
], ids=["truncated", "trailing", "cut-header", "version-3"])
def test_an_npy_header_that_lies_is_refused_before_allocating(tmp_path, change, needle):
    buffer = io.BytesIO()
    np.save(buffer, table())
    (tmp_path / "w.npy").write_bytes(change(buffer.getvalue()))
    refused(tmp_path / "w.npy", tmp_path / "out", needle)


def test_an_npy_header_declaring_terabytes_is_refused_before_allocating(tmp_path):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 4), }"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    (tmp_path / "w.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 64)
    refused(tmp_path / "w.npy", tmp_path / "out", "declares [1000000000000, 4] of float64 (32000000000000 bytes)")


@pytest.mark.parametrize("header, data, needle", [
    ({"w": {"dtype": "F64", "shape": [ROWS, COLS], "data_offsets": [0, 256]}}, b"\0" * 64, "past the file's end"),
    ({"w": {"dtype": "F64", "shape": [ROWS, COLS], "data_offsets": [0, 256]},
      "v": {"dtype": "F64", "shape": [ROWS, COLS], "data_offsets": [128, 384]}}, b"\0" * 384, "overlap"),
    ({"w": {"dtype": "Q7", "shape": [ROWS, COLS], "data_offsets": [0, 256]}}, b"\0" * 256, "has dtype \"Q7\""),
    ({"w": {"dtype": "F64", "shape": [ROWS, -COLS], "data_offsets": [0, 256]}}, b"\0" * 256, "non-negative integers"),
], ids=["past-end", "overlap", "dtype", "negative"])
def test_a_safetensors_header_that_lies_is_refused(tmp_path, header, data, needle):
    (tmp_path / "w.safetensors").write_bytes(safetensors_bytes(header, data))
    refused(tmp_path / "w.safetensors", tmp_path / "out", needle, "--key", "w")


def test_a_safetensors_header_length_past_the_file_is_refused(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", 10**15) + b"{}")
    refused(tmp_path / "w.safetensors", tmp_path / "out", "header length is past the file")


def test_an_empty_table_is_refused_rather_than_extended_into_nan(tmp_path):
    np.save(tmp_path / "w.npy", np.zeros((0, COLS)))
    assert "is empty (shape [0, 4])" in one_error(*cli("extend", str(tmp_path / "w.npy"), "--to", "12", "--out", str(tmp_path / "ext")))
    assert not (tmp_path / "ext").exists()


def test_a_weights_file_over_the_byte_budget_is_refused(tmp_path, monkeypatch):
    np.save(tmp_path / "w.npy", table())  # 384 bytes
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "300")
    refused(tmp_path / "w.npy", tmp_path / "out", "over the 300 bytes limit")


def test_a_pickle_that_needs_code_is_refused_saying_how_to_convert_it(tmp_path):
    torch = pytest.importorskip("torch")

    class Payload:
        def __reduce__(self):
            return (print, (SECRET,))

    torch.save({"w": torch.ones(ROWS, COLS), "p": Payload()}, tmp_path / "w.pt")
    line = refused(tmp_path / "w.pt", tmp_path / "out", "safetensors.torch.save_file", "--key", "w")
    assert SECRET not in line
    torch.save({"w": torch.from_numpy(table())}, tmp_path / "ok.pt")  # plain tensors still load, as float32
    assert np.abs(load_table(str(tmp_path / "ok.pt"), None, (ROWS, COLS)) - table()).max() <= 1e-7 * np.abs(table()).max()
