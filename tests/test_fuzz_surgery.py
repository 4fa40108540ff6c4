"""doctor, patch, model-parity and `build --from-model` under hostile files (issue 18): hypothesis mutates
copies of a real onnxruntime-genai export (flipped bytes, mutated protobuf fields, renamed and relinked
files, hostile genai_config.json and metadata) and of a real transformers folder (config, index, shard
headers). Whatever it gets, a command ends with exit 0 or 1 and its report, or exit 2 and one `error:`
line; never a traceback; the secret beside the inputs is never opened; nothing is written outside --out
and the source folder is byte-identical afterwards. Derandomized and bounded (a few dozen runs)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import surgery_fixtures as sf
from .test_fuzz_cli import JSON
from .test_hardening_surgery import SECRET, snapshot
from .test_parity_cli import cli

FUZZ = settings(max_examples=int(os.environ.get("POSEXPORT_FUZZ_EXAMPLES", 40)), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
OPENED: list[str] = []


def audit(event: str, args: tuple) -> None:
    if event == "open" and OPENED and isinstance(args[0], (str, bytes, os.PathLike)):
        OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(audit)  # records only while a run is watched (OPENED non-empty); hooks cannot be removed


def watched(*args: str) -> tuple[int, str, str, list[str]]:
    """The CLI in this process, and every file Python opened meanwhile."""
    OPENED[:] = ["(watching)"]
    try:
        code, out, err = cli(*args)
    finally:
        opened = OPENED[1:]
        OPENED.clear()
    return code, out, err, opened


@pytest.fixture(scope="module")
def genai() -> tuple[Path, Path]:
    pytest.importorskip("onnxruntime_genai")
    folder = sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)
    return folder, sf.genai_export(folder)


def flip_bytes(path: Path, data: st.DataObject) -> None:
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 8), label="flips")):
        raw[data.draw(st.integers(0, len(raw) - 1), label="at")] ^= data.draw(st.integers(1, 255), label="xor")
    path.write_bytes(bytes(raw))


def mutate_fields(path: Path, data: st.DataObject) -> None:
    """An initializer's external data, dims or dtype, or the model's metadata, changed."""
    m = onnx.load(str(path), load_external_data=False)
    tensor = m.graph.initializer[data.draw(st.integers(0, len(m.graph.initializer) - 1), label="tensor")]
    what = data.draw(st.sampled_from(["location", "offset", "length", "dims", "dtype", "metadata"]), label="field")
    if what in ("location", "offset", "length"):
        values = {"location": ["model.onnx", "../SECRET", "/etc/passwd", "absent", "model.onnx.data", ""],
                  "offset": ["0", "-1", "99999999999", "x", "16"], "length": ["0", "4", "1" * 30, "65536"]}[what]
        del tensor.external_data[:]
        tensor.external_data.add(key="location", value="model.onnx.data")
        tensor.external_data.add(key=what, value=data.draw(st.sampled_from(values), label=what))
    elif what == "dims":
        tensor.dims[:] = data.draw(st.lists(st.integers(-2, 5000), max_size=3), label="dims")
    elif what == "dtype":
        tensor.data_type = data.draw(st.sampled_from([0, 8, 16, 999, onnx.TensorProto.FLOAT16]), label="dtype")
    else:
        m.metadata_props.add(key="posexport.position_limits", value=json.dumps(data.draw(JSON, label="metadata")))
    path.write_bytes(m.SerializeToString())


def relink(folder: Path, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["model.onnx.data", "tokenizer.json", "genai_config.json"]), label="relinked")
    (folder / name).unlink()
    target = data.draw(st.sampled_from(["../SECRET", "/etc/passwd", "model.onnx", "nowhere"]), label="to")
    os.symlink(target, folder / name)


def hostile_config(folder: Path, data: st.DataObject) -> None:
    config = json.loads((folder / "genai_config.json").read_text())
    section = data.draw(st.sampled_from([("model",), ("model", "decoder"), ("search",), ()]), label="section")
    target = config
    for key in section:
        target = target[key]
    target[data.draw(st.sampled_from(["context_length", "head_size", "filename", "max_length", "model"]), label="key")] = data.draw(JSON, label="value")
    (folder / "genai_config.json").write_text(json.dumps(config, allow_nan=True))


MUTATIONS = {  # in the order they are applied
    "mutate a field": lambda f, d: mutate_fields(f / "model.onnx", d),
    "hostile genai_config": hostile_config,
    "flip the model": lambda f, d: flip_bytes(f / "model.onnx", d),
    "flip the data": lambda f, d: flip_bytes(f / "model.onnx.data", d),
    "truncate the data": lambda f, d: os.truncate(f / "model.onnx.data", d.draw(st.integers(0, 478463), label="size")),
    "relink a file": relink,
}


def command(data: st.DataObject, model: Path, original: Path, hf: Path, out: Path) -> list[str]:
    which = data.draw(st.sampled_from(["doctor", "patch", "model-parity"]), label="command")
    source = ["--from-model", str(hf)] if data.draw(st.booleans(), label="from model") else []
    if which == "doctor":
        return ["doctor", str(model), *source]
    if which == "patch":
        return ["patch", str(model), "--out", str(out / "model.onnx"), *source]
    return ["model-parity", "--model", str(model), "--against", str(original), "--prompt", "4", "--runtimes", "ort-cpu"]


def check_outcome(code: int, out: str, err: str, opened: list[str], secret: Path) -> None:
    assert "Traceback" not in out + err, out + err
    assert not [p for p in opened if Path(p).resolve() in (secret.resolve(), Path("/etc/passwd"))], opened
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
    else:
        assert code in (0, 1) and out, (code, out, err)


@FUZZ
@given(data=st.data())
def test_doctor_patch_and_model_parity_on_mutated_genai_folders(genai, data):
    hf, original = genai
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "SECRET").write_text(SECRET)
        folder, out = root / "m", root / "out"
        folder.mkdir(), out.mkdir()
        for f in original.parent.iterdir():
            (folder / f.name).write_bytes(f.read_bytes())
        chosen = data.draw(st.lists(st.sampled_from(list(MUTATIONS)), min_size=1, max_size=2, unique=True), label="mutations")
        for name in sorted(chosen, key=list(MUTATIONS).index):  # relinking last: no write goes through a link
            MUTATIONS[name](folder, data)
        before = snapshot(folder)
        args = command(data, folder / "model.onnx", original, hf, out)
        code, stdout, err, opened = watched(*args)
        check_outcome(code, stdout, err, opened, root / "SECRET")
        assert snapshot(folder) == before and sorted(p.name for p in root.iterdir()) == ["SECRET", "m", "out"]
        assert args[0] != "patch" or code == 0 or list(out.iterdir()) == []


# --- build --from-model on mutated transformers folders ----------------------------------------------


def mutate_model_folder(folder: Path, data: st.DataObject) -> None:
    what = data.draw(st.sampled_from(["config", "index", "header", "relink"]), label="folder mutation")
    if what == "config":
        config = json.loads((folder / "config.json").read_text())
        key = data.draw(st.sampled_from(["n_positions", "n_embd", "n_head", "model_type", "rope_scaling", "max_position_embeddings"]), label="key")
        config[key] = data.draw(JSON, label="value")
        (folder / "config.json").write_text(json.dumps(config, allow_nan=True))
    elif what == "index":
        shard = data.draw(st.sampled_from(["../SECRET", "/etc/passwd", "model.safetensors", "", "absent.safetensors"]), label="shard")
        weight_map = data.draw(st.sampled_from([{"transformer.wpe.weight": shard, "wpe.weight": shard}, [shard], shard]), label="map")
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    elif what == "header":
        raw = bytearray((folder / "model.safetensors").read_bytes())
        for _ in range(data.draw(st.integers(1, 6), label="flips")):
            raw[data.draw(st.integers(0, min(len(raw) - 1, 400)), label="at")] ^= data.draw(st.integers(1, 255), label="xor")
        (folder / "model.safetensors").write_bytes(bytes(raw))
    else:
        (folder / "model.safetensors").unlink()
        os.symlink(data.draw(st.sampled_from(["../SECRET", "/etc/passwd", "config.json"]), label="to"), folder / "model.safetensors")


@FUZZ
@given(data=st.data())
def test_build_from_model_on_mutated_folders(data):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "SECRET").write_text(SECRET)
        folder, out = root / "gpt2", root / "out"
        folder.mkdir()
        for f in sf.tiny_gpt2().iterdir():
            (folder / f.name).write_bytes(f.read_bytes())
        mutate_model_folder(folder, data)
        before = snapshot(folder)
        code, stdout, err, opened = watched("build", "--from-model", str(folder), "--out", str(out))
        check_outcome(code, stdout, err, opened, root / "SECRET")
        assert snapshot(folder) == before and set(p.name for p in root.iterdir()) <= {"SECRET", "gpt2", "out"}
        assert code == 0 or not out.exists() or list(out.iterdir()) == []
