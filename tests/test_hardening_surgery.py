"""Models and folders handed over by others (issue 18): doctor, patch, model-parity, --from-model and
--against-hf read only checked files inside their inputs, never write over them, and answer every bad
input with one `error:` line (exit 2)."""

from __future__ import annotations

import json
import math
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


# --- doctor, patch and model-parity on a real genai export, copied and mutated ----------------------

from . import surgery_fixtures as sf  # noqa: E402
from .test_hardening_io import one_error  # noqa: E402
from .test_parity_cli import cli  # noqa: E402


@pytest.fixture(scope="module")
def hf_folder() -> Path:
    return sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)


@pytest.fixture(scope="module")
def genai_model(hf_folder) -> Path:
    pytest.importorskip("onnxruntime_genai")
    return sf.genai_export(hf_folder)


def copy_folder(model: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    for f in model.parent.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    return dest / model.name


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry of a folder: a file's bytes, a symlink's target."""
    return {p.name: os.readlink(p) if p.is_symlink() else p.read_bytes() for p in sorted(folder.iterdir())}


def test_patch_never_writes_over_a_file_the_source_reads(genai_model, tmp_path):
    model = copy_folder(genai_model, tmp_path / "m")
    before = snapshot(model.parent)
    one_error(*cli("patch", str(model), "--out", str(model.parent / "model.onnx.data")), "which is its external data 'model.onnx.data'")
    one_error(*cli("patch", str(model), "--out", str(model)), "which is the model being patched")
    one_error(*cli("patch", str(model), "--out", str(model.parent / "patched.onnx")), "which is its folder's genai_config.json")
    os.replace(model, model.parent / "orig.onnx")  # orig.onnx still reads model.onnx.data
    one_error(*cli("patch", str(model.parent / "orig.onnx"), "--out", str(model)), "which is its external data 'model.onnx.data'")
    os.replace(model.parent / "orig.onnx", model)
    os.symlink(model.parent / "model.onnx.data", tmp_path / "link.data")  # an output that is a symlink to an input
    (tmp_path / "link").mkdir()
    os.symlink(model.parent / "model.onnx.data", tmp_path / "link" / "x.onnx.data")
    one_error(*cli("patch", str(model), "--out", str(tmp_path / "link" / "x.onnx")), "which is its external data")
    assert snapshot(model.parent) == before


def test_patch_refuses_existing_files_it_did_not_write_and_reruns_over_its_own(genai_model, hf_folder, tmp_path):
    model = copy_folder(genai_model, tmp_path / "m")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tokenizer.json").write_text("a user's own file")
    one_error(*cli("patch", str(model), "--out", str(out / "model.onnx")), "tokenizer.json exists and is not a file `posexport patch` wrote")
    (out / "tokenizer.json").unlink()
    assert cli("patch", str(model), "--out", str(out / "model.onnx"), "--from-model", str(hf_folder))[0] == 0
    first = snapshot(out)
    assert cli("patch", str(model), "--out", str(out / "model.onnx"), "--from-model", str(hf_folder))[0] == 0  # its own output
    assert snapshot(out) == first


def test_patch_copies_only_the_files_a_genai_folder_needs_and_never_from_outside(genai_model, hf_folder, tmp_path):
    (tmp_path / "SECRET").write_text(SECRET)
    model = copy_folder(genai_model, tmp_path / "m")
    os.symlink("/etc/passwd", model.parent / "notes.txt")
    with open(model.parent / "huge.bin", "wb") as f:  # 3 GiB, sparse: never read
        f.truncate(3 << 30)
    assert cli("patch", str(model), "--out", str(tmp_path / "a" / "model.onnx"))[0] == 2  # no such folder: one line
    (tmp_path / "a").mkdir()
    code, out, err = cli("patch", str(model), "--out", str(tmp_path / "a" / "model.onnx"), "--from-model", str(hf_folder))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["genai_config.json", "model.onnx", "model.onnx.data", "tokenizer.json", "tokenizer_config.json"]
    (model.parent / "tokenizer.json").unlink()
    os.symlink("../SECRET", model.parent / "tokenizer.json")
    (tmp_path / "b").mkdir()
    one_error(*cli("patch", str(model), "--out", str(tmp_path / "b" / "model.onnx")), "outside")
    assert list((tmp_path / "b").iterdir()) == []


def test_a_hugging_face_cache_layout_is_doctored_and_patched(genai_model, hf_folder, tmp_path):
    model = as_hf_cache(copy_folder(genai_model, tmp_path / "m"), tmp_path / "models--tiny--llama")
    assert all(p.is_symlink() for p in model.parent.iterdir())
    code, out, err = cli("doctor", str(model), "--json", str(tmp_path / "report.json"))
    assert code == 0 and "genai_config.json context_length: 2048" in out and "rope-cache" in out, err
    (tmp_path / "fixed").mkdir()
    code, out, err = cli("patch", str(model), "--out", str(tmp_path / "fixed" / "model.onnx"), "--position-limit", "4096",
                         "--from-model", str(hf_folder))
    assert code == 0, err
    fixed = onnx.load(str(tmp_path / "fixed" / "model.onnx"))
    assert [list(t.dims) for t in fixed.graph.initializer if t.name == "cos_cache"] == [[4096, 8]]
    code, out, err = cli("model-parity", "--model", str(tmp_path / "fixed" / "model.onnx"), "--against", str(model), "--prompt", "8", "--runtimes", "ort-cpu")
    assert code == 0, out + err


def mutated(model: Path, folder: Path, change) -> Path:  # noqa: ANN001
    """A self-contained copy of the model, changed by ``change(model)``, saved in ``folder``."""
    m = onnx.load(str(model))
    change(m)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(m.SerializeToString())
    return folder / "model.onnx"


def head_with(model: Path, folder: Path, **entries: str) -> Path:
    """The model's own protobuf and data in ``folder``, cos_cache's external-data entries replaced."""
    copy = copy_folder(model, folder)
    m = onnx.load(str(copy), load_external_data=False)
    tensor = next(t for t in m.graph.initializer if t.name == "cos_cache")
    del tensor.external_data[:]
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    copy.write_bytes(m.SerializeToString())
    return copy


@pytest.mark.parametrize("entries, needle", [
    (dict(location="model.onnx", offset="0", length="65536"), "is the model file itself"),
    (dict(location="model.onnx.data", offset="0", length="4"), "length 4 is not its 65536 bytes"),
    (dict(location="../SECRET", offset="0", length="8"), "outside"),
    (dict(location="/etc/passwd"), "relative to the model's folder"),
    (dict(location="model.onnx.data", offset="478400", length="65536"), "past the end"),
])
def test_external_data_that_lies_is_one_line_for_doctor_patch_and_model_parity(genai_model, tmp_path, entries, needle):
    (tmp_path / "SECRET").write_text(SECRET)
    model = head_with(genai_model, tmp_path / "m", **entries)
    before = snapshot(model.parent)
    one_error(*cli("doctor", str(model)), needle)
    one_error(*cli("patch", str(model), "--out", str(tmp_path / "out.onnx")), needle)
    one_error(*cli("model-parity", "--model", str(model), "--against", str(genai_model), "--runtimes", "ort-cpu"), needle)
    assert snapshot(model.parent) == before and not (tmp_path / "out.onnx").exists()


def set_cache(name: str, **fields):  # noqa: ANN003, ANN201
    def change(m: onnx.ModelProto) -> None:
        tensor = next(t for t in m.graph.initializer if t.name == name)
        for key, value in fields.items():
            if key == "dims":
                del tensor.dims[:]
                tensor.dims.extend(value)
            else:
                setattr(tensor, key, value)
    return change


def set_metadata(value: str):  # noqa: ANN201
    def change(m: onnx.ModelProto) -> None:
        m.metadata_props.add(key="posexport.position_limits", value=value)
    return change


def caches_from_an_if(missing: bool, switch: np.ndarray = np.array(1024, dtype=np.int64)):  # noqa: ANN201
    """cos/sin caches switched by If(Greater(total length, ``switch``)), one branch short of an output when ``missing``."""
    def change(m: onnx.ModelProto) -> None:
        caches = {t.name: t for t in m.graph.initializer if t.name in ("cos_cache", "sin_cache")}
        outputs = [oh.make_tensor_value_info(n, 1, None) for n in caches]

        def branch(name: str, drop: bool) -> onnx.GraphProto:
            nodes = [oh.make_node("Constant", [], [f"{name}_{n}"], value=t) for n, t in caches.items()]
            outs = [oh.make_tensor_value_info(f"{name}_{n}", 1, None) for n in caches]
            return oh.make_graph(nodes, name, [], outs[:1] if drop else outs)
        for t in caches.values():
            m.graph.initializer.remove(t)
        m.graph.initializer.append(onh.from_array(switch, "switch_at"))
        m.graph.node.insert(0, oh.make_node("Greater", ["switch_at", "switch_at"], ["long"]))
        m.graph.node.insert(1, oh.make_node("If", ["long"], list(caches), then_branch=branch("long", missing), else_branch=branch("short", False)))
        del outputs
    return change


HOSTILE_MODELS = {
    "zero-row caches": set_cache("cos_cache", dims=[0, 8], raw_data=b""),
    "string caches": set_cache("cos_cache", data_type=onnx.TensorProto.STRING),
    "unknown dtype": set_cache("cos_cache", data_type=999),
    "declared size past the data": set_cache("cos_cache", dims=[4096, 8]),
    "an If branch short of an output": caches_from_an_if(missing=True),
    "a NaN switch length": caches_from_an_if(missing=False, switch=np.array(np.nan, dtype=np.float32)),
    "a switch length of 1e300": caches_from_an_if(missing=False, switch=np.array(1e300)),
    "limits metadata not JSON": set_metadata("{not json"),
    "limits metadata nested deep": set_metadata("[" * 100000),
    "limits metadata of the wrong shape": set_metadata('{"cos_cache": "many"}'),
}


@pytest.mark.parametrize("case", list(HOSTILE_MODELS))
def test_hostile_caches_and_metadata_are_a_report_or_one_line(genai_model, hf_folder, tmp_path, case):
    model = mutated(genai_model, tmp_path / "m", HOSTILE_MODELS[case])
    for args in (["doctor", str(model), "--from-model", str(hf_folder)],
                 ["patch", str(model), "--out", str(tmp_path / "out.onnx"), "--from-model", str(hf_folder)]):
        code, out, err = cli(*args)
        assert "Traceback" not in out + err and code in (0, 1, 2), out + err
        if code == 2:
            one_error(code, out, err, "")
        assert not (tmp_path / "out.onnx").exists() or code == 0


def test_a_position_limit_past_the_budget_is_refused_naming_it(genai_model, hf_folder, tmp_path):
    one_error(*cli("patch", str(genai_model), "--out", str(tmp_path / "out.onnx"), "--from-model", str(hf_folder),
                   "--position-limit", "2147483648"), "--position-limit 2147483648")
    assert list(tmp_path.iterdir()) == []


def test_the_byte_budget_reaches_doctor_and_patch(genai_model, hf_folder, tmp_path, monkeypatch):
    # Doctor and patch read the graph and the tensors a site needs (here 64 KiB caches), never the whole
    # data (tests/test_surgery_size.py): the budget bounds each of those reads.
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "32K")
    needle = "over the 32 KiB limit"
    one_error(*cli("doctor", str(genai_model)), needle)
    one_error(*cli("patch", str(genai_model), "--out", str(tmp_path / "out.onnx"), "--from-model", str(hf_folder)), needle)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, needle", [
    ("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object"), ('{"model": {"decoder": {"head_size": "abc"}}}', 'head_size = "abc"'),
    ('{"model": {"context_length": Infinity}}', "context_length = Infinity"), ("[" * 100000, "nested too deeply"),
    ('{"model": {"decoder": {"filename": "../model.onnx"}}}', "expected a plain file name"), ('{"model": 3}', "model = 3"),
])
def test_a_hostile_genai_config_is_one_line_for_every_command(genai_model, hf_folder, tmp_path, text, needle):
    model = copy_folder(genai_model, tmp_path / "m")
    (model.parent / "genai_config.json").write_text(text)
    before = snapshot(model.parent)
    (tmp_path / "out").mkdir()
    one_error(*cli("doctor", str(model)), needle)
    one_error(*cli("patch", str(model), "--out", str(tmp_path / "out" / "model.onnx"), "--from-model", str(hf_folder)), needle)
    one_error(*cli("model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu"), needle)
    assert snapshot(model.parent) == before and list((tmp_path / "out").iterdir()) == []


def not_a_model(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "bad.onnx"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "random bytes":
        path.write_bytes(np.random.default_rng(1).bytes(4096))
    elif kind == "dev-zero":
        return Path("/dev/zero")
    return path


@pytest.mark.parametrize("kind, needle", [("fifo", "is a FIFO"), ("dev-zero", "character device"), ("folder", "is a folder"),
                                          ("random bytes", "bad.onnx"), ("absent", "no such file")])
def test_model_parity_doctor_and_patch_on_what_is_not_a_model(genai_model, tmp_path, kind, needle):
    path = not_a_model(tmp_path, kind)
    one_error(*cli("model-parity", "--model", str(path), "--against", str(genai_model), "--runtimes", "ort-cpu"), needle)
    one_error(*cli("model-parity", "--model", str(genai_model), "--against", str(path), "--runtimes", "ort-cpu"), needle)
    one_error(*cli("doctor", str(path)), needle)
    one_error(*cli("patch", str(path), "--out", str(tmp_path / "out.onnx")), needle)


def test_a_model_onnxruntime_cannot_load_is_a_failed_row_naming_the_runtime(genai_model, tmp_path):
    def unknown_op(m: onnx.ModelProto) -> None:
        m.graph.node[0].op_type = "NoSuchOp"
    model = mutated(genai_model, tmp_path / "m", unknown_op)
    code, out, err = cli("model-parity", "--model", str(model), "--against", str(genai_model), "--runtimes", "ort-cpu")
    assert code == 1 and "ort-cpu unavailable: failed to load model.onnx" in out and "NoSuchOp" in out, out + err
    assert "Traceback" not in out + err


# --- --from-model and --against-hf on folders handed over by others ---------------------------------


def gpt2_copy(tmp_path: Path) -> Path:
    """A tiny GPT-2 folder (its learned table is read from the checkpoint), copied to be mutated."""
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for f in sf.tiny_gpt2().iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    return folder


def build_from(folder: Path, tmp_path: Path) -> tuple[int, str, str]:
    return cli("build", "--from-model", str(folder), "--out", str(tmp_path / "out"))


@pytest.mark.parametrize("shard", ["../SECRET.safetensors", "/etc/passwd", "symlink"])
def test_an_index_never_leads_outside_the_folder(tmp_path, shard):
    folder = gpt2_copy(tmp_path)
    os.replace(folder / "model.safetensors", tmp_path / "SECRET.safetensors")  # real tensors, outside
    if shard == "symlink":
        os.symlink(tmp_path / "SECRET.safetensors", folder / "shard.safetensors")
        shard = "shard.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"transformer.wpe.weight": shard, "wpe.weight": shard}}))
    one_error(*build_from(folder, tmp_path), "outside")
    assert not (tmp_path / "out").exists()


def safetensors_file(path: Path, header: dict, data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + data)


@pytest.mark.parametrize("header, data, needle", [
    ({"wpe.weight": {"dtype": "F32", "shape": [128, 64], "data_offsets": [0, 32768]}}, b"\0" * 100, "past the file's end"),
    ({"wpe.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
      "wte.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [8, 24]}}, b"\0" * 24, "overlap"),
    ({"wpe.weight": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}, b"\0", "dtype \"Q4\""),
    (None, b"", "header length is past the file"),
])
def test_a_safetensors_header_that_lies_is_one_line(tmp_path, header, data, needle):
    folder = gpt2_copy(tmp_path)
    if header is None:
        (folder / "model.safetensors").write_bytes((10 ** 12).to_bytes(8, "little") + b"{}")
    else:
        safetensors_file(folder / "model.safetensors", header, data)
    one_error(*build_from(folder, tmp_path), needle)


def test_a_pickled_checkpoint_is_refused_in_one_line(tmp_path):
    import pickle

    folder = gpt2_copy(tmp_path)
    (folder / "model.safetensors").unlink()

    class Code:
        def __reduce__(self):  # noqa: ANN204
            return (os.system, ("echo pwned",))
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"wpe.weight": Code()}))
    line = one_error(*build_from(folder, tmp_path), "refused")
    assert "pwned" not in line


BAD_CONFIGS = {
    "rope_theta NaN": ({"rope_theta": float("nan")}, "'rope_theta' = nan: expected a finite number"),
    "no heads": ({"num_attention_heads": 0}, "'num_attention_heads' = 0: expected a positive integer"),
    "huge head_dim": ({"head_dim": 10 ** 18}, "--head-dim 1000000000000000000"),
    "infinite max positions": ({"max_position_embeddings": float("inf")}, "'max_position_embeddings' = inf"),
    "rope_type a dict": ({"rope_scaling": {"rope_type": {"a": 1}}}, "'rope_type' = {\"a\": 1}: expected the name"),
    "absurd base": ({"rope_theta": 1e308}, "--base 1e+308: leaves 1 of 8 frequency pairs rotating"),
    "absurd factor": ({"rope_scaling": {"rope_type": "linear", "factor": 1e308}}, "--factor 1e+308: leaves 0 of 8"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_doctor_patch_and_build_refuse_a_config_with_the_same_words(genai_model, hf_folder, tmp_path, case):
    change, needle = BAD_CONFIGS[case]
    folder = tmp_path / "cfg"
    folder.mkdir()
    config = json.loads((hf_folder / "config.json").read_text())
    config.pop("rope_parameters", None)
    (folder / "config.json").write_text(json.dumps({**config, "rope_theta": 10000.0, **change}))
    lines = {one_error(*build_from(folder, tmp_path), needle),
             one_error(*cli("doctor", str(genai_model), "--from-model", str(folder)), needle),
             one_error(*cli("patch", str(genai_model), "--out", str(tmp_path / "p.onnx"), "--from-model", str(folder)), needle)}
    assert len({line.split(": ", 2)[-1] for line in lines}) == 1, lines


def test_against_hf_without_weights_is_one_line(genai_model, hf_folder, tmp_path):
    folder = tmp_path / "noweights"
    folder.mkdir()
    (folder / "config.json").write_bytes((hf_folder / "config.json").read_bytes())
    one_error(*cli("model-parity", "--model", str(genai_model), "--against-hf", str(folder), "--runtimes", "ort-cpu"), "no weights")


@pytest.mark.parametrize("encoding", ["t5", "learned", "swin", "vit-learned"])
def test_a_negative_seed_is_one_line(tmp_path, encoding):
    one_error(*cli("build", "--encoding", encoding, "--seed", "-1", "--out", str(tmp_path)), "--seed -1")


def flat_caches(m: onnx.ModelProto) -> None:
    for t in m.graph.initializer:
        if t.name in ("cos_cache", "sin_cache"):
            t.dims[:] = [math.prod(t.dims)]


def test_caches_that_would_abort_onnxruntime_are_refused_before_it_runs(genai_model, tmp_path):
    """A 1-D cos/sin cache makes onnxruntime's GroupQueryAttention terminate the process; model-parity
    refuses it first, naming the node (this test's process surviving is half the check)."""
    model = mutated(genai_model, tmp_path / "m", flat_caches)
    (tmp_path / "m" / "genai_config.json").write_bytes((genai_model.parent / "genai_config.json").read_bytes())
    one_error(*cli("model-parity", "--model", str(model), "--against", str(genai_model), "--runtimes", "ort-cpu"),
              "reads cos/sin caches of shapes [16384] and [16384]")
    one_error(*cli("model-parity", "--model", str(genai_model), "--against", str(model), "--runtimes", "ort-cpu"), "[16384]")


def test_a_library_refusal_reaching_the_cli_is_one_line_and_a_bug_is_not_hidden(monkeypatch):
    import posexport.surgery as surgery

    def invalid(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        onnx.checker.check_model(onnx.ModelProto())  # onnx's own ValidationError

    monkeypatch.setattr(surgery, "doctor", invalid)
    one_error(*cli("doctor", "model.onnx"), "the model is not valid ONNX")
    monkeypatch.setattr(surgery, "doctor", lambda *args, **kwargs: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        cli("doctor", "model.onnx")
