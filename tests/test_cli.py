"""The `posexport` command end to end as a user types it (in-process; start-up timing in a subprocess)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import posexport

from .conftest import posexport_cli
from .test_parity_cli import cli


def test_list_shows_every_encoding_and_preset():
    from posexport.registry import ENCODINGS
    from posexport.rope.config import preset_names

    code, out, err = cli("list")
    assert code == 0, out + err
    for entry in ENCODINGS.values():
        assert entry.name in out
    assert all(name in out for name in preset_names())


@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "vit-learned"])
def test_build_help_lists_the_encodings_options(encoding):
    from posexport.registry import get_encoding

    code, out, err = cli("build", "--encoding", encoding, "--help")
    assert code == 0, out + err
    for option, default, _ in get_encoding(encoding).describe_params():
        assert option in out and default in out
    assert "--out" in out  # the command's own options come first


def test_bool_parameters_are_flag_pairs():
    from posexport.registry import get_encoding

    options = {row[0] for row in get_encoding("alibi").describe_params()}
    assert "--causal/--no-causal" in options
    options = {row[0] for row in get_encoding("vit-learned").describe_params()}
    assert "--class-token/--no-class-token" in options


STARTUP = """
import sys, time
start = time.process_time()
from posexport_cli import main
sys.argv = ["posexport", *sys.argv[1:]]
try:
    main.main()
except SystemExit:
    pass
heavy = [m for m in ("torch", "onnxscript", "onnx", "ml_dtypes", "onnxruntime") if m in sys.modules]
print("RESULT", time.process_time() - start, ",".join(heavy))
"""


@pytest.mark.parametrize("args", [["--help"], ["list"]])
def test_help_and_list_start_fast_without_the_heavy_libraries(args):
    """`posexport --help` and `list` import neither torch nor onnx(script), and answer in under 0.5 s (CPU
    time of the command in a fresh interpreter, median of 3: wall time on a loaded machine says little)."""
    times = []
    for _ in range(3):
        proc = subprocess.run([sys.executable, "-c", STARTUP, *args], capture_output=True, text=True, timeout=120)
        line = proc.stdout.strip().splitlines()[-1]
        assert line.startswith("RESULT"), proc.stdout + proc.stderr
        _, seconds, heavy = (line.split(" ") + [""])[:3]
        assert heavy == "", f"posexport {' '.join(args)} imported {heavy}"
        times.append(float(seconds))
    assert statistics.median(times) < 0.5, times


@pytest.mark.parametrize("flag", [["--no-causal"], ["--causal", "false"], ["--causal=false"]])
def test_bool_options_take_the_flag_or_the_word(tmp_path, flag):
    code, out, err = cli("build", "--encoding", "alibi", "--heads", "4", *flag, "--out", str(tmp_path))
    assert code == 0, out + err
    assert json.loads((tmp_path / "alibi.json").read_text())["params"]["causal"] is False
    code, out, err = cli("build", "--encoding", "alibi", "--causal", "--heads", "4", "--out", str(tmp_path / "on"))
    assert code == 0, out + err
    assert json.loads((tmp_path / "on" / "alibi.json").read_text())["params"]["causal"] is True


def test_a_value_option_without_its_value_is_one_clear_error():
    code, out, err = cli("build", "--encoding", "alibi", "--heads")
    assert code == 2 and err.startswith("error: --heads") and "needs a value" in err, err


@pytest.mark.parametrize("source", ["script", "torch"])
def test_build_writes_graph_and_manifest_deterministically(tmp_path: Path, source: str):
    args = ["build", "--encoding", "rope", "--head-dim", "32", "--heads", "2", "--rotary-dim", "16",
            "--pair-layout", "interleaved", "--layout", "bhsd", "--max-positions", "512", "--dtype", "float16",
            "--source", source]
    posexport_cli(*args, "--out", str(tmp_path / "a"), check=True)
    posexport_cli(*args, "--out", str(tmp_path / "b"), check=True)
    for name in ("rope.onnx", "rope.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    # Nothing of the machine that built it: the torch exporter's stack traces would quote posexport's paths.
    assert str(Path(posexport.__file__).parent).encode() not in (tmp_path / "a" / "rope.onnx").read_bytes()
    manifest = json.loads((tmp_path / "a" / "rope.json").read_text())
    import hashlib

    assert manifest["sha256"] == hashlib.sha256((tmp_path / "a" / "rope.onnx").read_bytes()).hexdigest()
    assert manifest["params"]["rotary_dim"] == 16 and manifest["params"]["layout"] == "bhsd"
    assert manifest["dtype"] == "float16" and manifest["source"] == source and manifest["opset"] == 18
    assert [i["name"] for i in manifest["inputs"]] == ["x", "position_ids"]
    assert {"onnx", "onnxruntime", "torch", "posexport"} <= set(manifest["versions"])
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["rope.json", "rope.onnx"]


def test_built_graph_passes_parity_from_the_cli(tmp_path: Path):
    posexport_cli("build", "--head-dim", "16", "--heads", "2", "--out", str(tmp_path), "--name", "small", check=True)
    proc = posexport_cli("parity", str(tmp_path / "small.onnx"), "--runtimes", "ort-cpu,reference", "--seqs", "1,17", "--batches", "1,3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS" in proc.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["build", "--encoding", "nope"], "--encoding 'nope'"),
        (["build", "--head-dim", "127"], "--head-dim 127"),
        (["build", "--head-dim", "64", "--rotary-dim", "96"], "--rotary-dim 96"),
        (["build", "--base", "1"], "--base 1"),
        (["build", "--heads", "0"], "--heads 0"),
        (["build", "--dtype", "float8"], "--dtype 'float8'"),
        (["build", "--hed-dim", "64"], "--hed-dim"),
        (["build", "--opset", "12"], "--opset 12"),
        (["build", "--opset", "abc"], "--opset"),
        (["build", "--source", "jit"], "--source 'jit'"),
        (["build", "--backend", "magic"], "--backend 'magic'"),
        (["build", "--out", "/proc/posexport-cannot-write"], "--out /proc/posexport-cannot-write"),
        (["parity", "/nonexistent/graph.onnx"], "no such file"),
    ],
)
def test_bad_input_gives_one_clear_line(args, needle, tmp_path):
    proc = posexport_cli(*args, cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0] and lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not list(tmp_path.rglob("*.onnx"))


def test_failed_write_leaves_nothing_half_written(tmp_path: Path):
    # rope.json cannot be replaced (it is a folder): the build fails after writing rope.onnx's temporary.
    (tmp_path / "rope.json").mkdir()
    proc = posexport_cli("build", "--head-dim", "8", "--heads", "1", "--out", str(tmp_path))
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_parity_on_graph_without_manifest(tmp_path: Path):
    posexport_cli("build", "--head-dim", "8", "--heads", "1", "--out", str(tmp_path), check=True)
    (tmp_path / "rope.json").unlink()
    proc = posexport_cli("parity", str(tmp_path / "rope.onnx"))
    assert proc.returncode == 2 and "no manifest" in proc.stderr


def test_parity_on_a_file_that_is_not_onnx(tmp_path: Path):
    posexport_cli("build", "--head-dim", "8", "--heads", "1", "--out", str(tmp_path), check=True)
    (tmp_path / "rope.onnx").write_bytes(b"not a model at all")
    proc = posexport_cli("parity", str(tmp_path / "rope.onnx"))
    assert proc.returncode == 2 and "not an ONNX model" in proc.stderr


def test_built_files_are_readable_by_others(tmp_path: Path):
    posexport_cli("build", "--head-dim", "8", "--heads", "1", "--out", str(tmp_path), check=True)
    for name in ("rope.onnx", "rope.json"):
        assert (tmp_path / name).stat().st_mode & 0o044 == 0o044, name


def test_python_users_build_from_the_same_options(tmp_path: Path):
    """The library entry behind `posexport build`: one graph per dtype, saved as NAME-DTYPE, and a preset
    whose values the given ones override."""
    from posexport.options import build_from_options

    built = build_from_options("alibi", {"heads": 4, "causal": False}, dtype="float16,float32")
    written = built.save(tmp_path)
    assert [p.name for p, _ in written] == ["alibi-float16.onnx", "alibi-float32.onnx"]
    assert [g.manifest["params"]["causal"] for g in built.graphs] == [False, False]
    (onnx_path, json_path), = build_from_options(preset="llama-3.1-8b", values={"heads": "2"}).save(tmp_path)
    assert onnx_path.name == "llama-3.1-8b.onnx"
    manifest = json.loads(json_path.read_text())
    assert manifest["params"]["heads"] == 2 and manifest["params"]["scaling"] == "llama3"
