"""Models and folders handed over by others (issue 18): doctor, patch, model-parity, --from-model and
--against-hf read only checked files inside their inputs, never write over them, and answer every bad
input with one `error:` line (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from posexport import guarded
from posexport.errors import PosexportError

SECRET = "posexport-secret-bytes-0123456789"


def tiny_external(folder: Path, name: str = "model.onnx") -> Path:
    """A one-initializer model (w: 2x3 float32, random) with its data in NAME.data."""
    folder.mkdir(parents=True, exist_ok=True)
    w = onh.from_array(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32), "w")
    graph = oh.make_graph([oh.make_node("Identity", ["w"], ["y"])], "g", [], [oh.make_tensor_value_info("y", 1, [2, 3])], [w])
    path = folder / name
    onnx.save(oh.make_model(graph), str(path), save_as_external_data=True, location=name + ".data", size_threshold=0)
    return path


def as_hf_cache(model: Path, cache: Path) -> Path:
    """The model's folder laid out as a Hugging Face cache: snapshots/<rev>/FILE -> ../../blobs/<name>."""
    blobs, snapshot = cache / "blobs", cache / "snapshots" / "0123abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for i, f in enumerate(sorted(model.parent.iterdir())):
        os.replace(f, blobs / f"{i:040x}")
        os.symlink(f"../../blobs/{i:040x}", snapshot / f.name)
    return snapshot / model.name


def retarget(model: Path, **entries: str) -> onnx.ModelProto:
    """The model (without its data) with w's external-data entries replaced."""
    m = guarded.load_model(model)
    tensor = m.graph.initializer[0]
    del tensor.external_data[:]
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    return m


# --- the guarded reader ----------------------------------------------------------------------------


def test_external_data_in_a_hugging_face_cache_is_followed_into_its_blobs(tmp_path):
    model = as_hf_cache(tiny_external(tmp_path / "src"), tmp_path / "models--a--b")
    m = guarded.load_model(model)
    (entry,) = guarded.external_data(m, model)
    assert entry.path.parent == (tmp_path / "models--a--b" / "blobs").resolve() and (entry.offset, entry.length) == (0, 24)
    assert (entry.name, entry.dims, entry.dtype) == ("w", (2, 3), onnx.TensorProto.FLOAT)
    guarded.read_external_data(m, model)
    np.testing.assert_array_equal(onh.to_array(m.graph.initializer[0]), np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))


def test_a_symlink_out_of_a_folder_that_is_no_cache_snapshot_is_refused(tmp_path):
    (tmp_path / "secret.txt").write_text(SECRET)
    model = tiny_external(tmp_path / "m")
    (tmp_path / "m" / "model.onnx.data").unlink()
    os.symlink(tmp_path / "secret.txt", tmp_path / "m" / "model.onnx.data")
    with pytest.raises(PosexportError, match="outside"):
        guarded.external_data(guarded.load_model(model), model)
    assert guarded.inside(tmp_path / "m", "model.onnx") == model.resolve()


@pytest.mark.parametrize("entries, needle", [
    (dict(location="../secret.txt", length="24"), "outside"),
    (dict(location="/etc/passwd"), "relative to the model's folder"),
    (dict(location="model.onnx"), "the model file itself"),
    (dict(location="model.onnx.data", length="8"), "length 8 is not its 24 bytes"),
    (dict(location="model.onnx.data", offset="8"), "past the end"),
    (dict(location="model.onnx.data", offset="-1"), "not a byte count"),
    (dict(location="model.onnx.data", basepath="/"), "malformed external data"),
    (dict(offset="0"), "malformed external data"),
])
def test_every_external_location_is_checked_before_anything_is_read(tmp_path, entries, needle):
    (tmp_path / "secret.txt").write_text(SECRET)
    model = tiny_external(tmp_path / "m")
    with pytest.raises(PosexportError, match=needle):
        guarded.external_data(retarget(model, **entries), model)
    (entry,) = guarded.external_data(retarget(model, location="model.onnx.data", length="24"), model)
    assert entry.length == 24


def test_strings_and_unknown_dtypes_in_external_data_are_refused(tmp_path):
    model = tiny_external(tmp_path / "m")
    m = retarget(model, location="model.onnx.data")
    m.graph.initializer[0].data_type = onnx.TensorProto.STRING
    with pytest.raises(PosexportError, match="STRING, of no fixed size"):
        guarded.external_data(m, model)
    m.graph.initializer[0].data_type = 999
    with pytest.raises(PosexportError, match="999, of no fixed size"):
        guarded.external_data(m, model)


def test_fifos_devices_and_folders_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    for path, needle in [(tmp_path / "fifo", "is a FIFO"), (Path("/dev/zero"), "character device"),
                         (tmp_path, "is a folder"), (tmp_path / "absent", "no such file")]:
        with pytest.raises(PosexportError, match=needle):
            guarded.read_bytes(path)
        with pytest.raises(PosexportError, match=needle):
            guarded.load_model(path)


def test_reads_past_the_budget_or_the_end_are_refused_before_allocating(tmp_path, monkeypatch):
    model = tiny_external(tmp_path / "m")
    assert guarded.read_bytes(tmp_path / "m" / "model.onnx.data", 8, 16) == (tmp_path / "m" / "model.onnx.data").read_bytes()[8:24]
    with pytest.raises(PosexportError, match="past the file's 24 bytes"):
        guarded.read_bytes(tmp_path / "m" / "model.onnx.data", 8, 17)
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "100")
    with pytest.raises(PosexportError, match="over the 100 bytes limit .*POSEXPORT_MAX_BYTES"):
        guarded.read_external_data(guarded.load_model(model), model)


@pytest.mark.parametrize("text, needle", [(b"{", "not valid JSON"), (b"\xff\xfe", "not UTF-8"), (b"[" * 100000, "nested too deeply")])
def test_json_that_is_not_json_is_one_line(tmp_path, text, needle):
    (tmp_path / "c.json").write_bytes(text)
    with pytest.raises(PosexportError, match=needle) as e:
        guarded.read_json(tmp_path / "c.json")
    assert "\n" not in str(e.value)
