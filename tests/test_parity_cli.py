"""`posexport parity` as a user runs it: reports in every format, saved outputs, exit codes, bad input."""

from __future__ import annotations

import contextlib
import io
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from posexport import export
from posexport.verdicts import Outputs, read_json, to_json

from .conftest import artifact

SMALL = ["--seqs", "1,17", "--batches", "1,3"]


def cli(*args: str) -> tuple[int, str, str]:
    """The CLI's main() in this process (fast); returns exit code, stdout, stderr."""
    from posexport_cli import main as main_module
    from posexport_cli.common import console, err_console

    out, err = io.StringIO(), io.StringIO()
    saved_argv = sys.argv
    sys.argv = ["posexport", *args]
    console.file, err_console.file = out, err
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main_module.main()
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    finally:
        # Back to following sys.stdout/sys.stderr (None), not to the streams they were at this moment.
        sys.argv, console.file, err_console.file = saved_argv, None, None
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("graph")
    onnx_path, _ = export.save(artifact("rope", head_dim=16, heads=2, max_positions=512), out, "small")
    return onnx_path


def test_reports_in_every_format(built, tmp_path):
    code, out, err = cli("parity", str(built), "--runtimes", "ort-cpu,reference,openvino", *SMALL, "--pairwise",
                         "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"), "--markdown", str(tmp_path / "r.md"))
    assert code == 0, out + err
    assert "PASS" in out and "worst error" in out and "relative-position" in out
    report = read_json(tmp_path / "r.json")
    assert to_json(report) == (tmp_path / "r.json").read_text()  # round-trips byte for byte
    assert report.passed and {r.runtime for r in report.results} == {"ort-cpu", "reference", "openvino"}
    assert {r.runtime for r in report.pairwise} == {"openvino vs ort-cpu", "openvino vs reference", "ort-cpu vs reference"}
    suites = ET.parse(tmp_path / "r.xml").getroot()
    (suite,) = suites
    assert int(suite.get("tests")) == len(report.results) + len(report.pairwise) + len(report.properties)
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("# posexport parity: PASS") and "| ort-cpu |" in md


def test_outputs_saved_on_one_machine_are_judged_on_another(built, tmp_path):
    saved = tmp_path / "cpu.npz"
    code, out, err = cli("parity", str(built), "--runtimes", "ort-cpu", *SMALL, "--no-properties", "--save-outputs", str(saved))
    assert code == 0, out + err
    outputs = Outputs.load(saved)
    assert {r for _, _, r in outputs.arrays} == {"ort-cpu"} and len(outputs.digests) == len(outputs.arrays)
    code, out, err = cli("parity", str(built), "--runtimes", "reference", *SMALL, "--no-properties", "--pairwise",
                         "--load-outputs", str(saved), "--json", str(tmp_path / "r.json"))
    assert code == 0, out + err
    report = read_json(tmp_path / "r.json")
    assert {r.runtime for r in report.results} == {"reference", "ort-cpu (saved)"}
    assert {r.runtime for r in report.pairwise} == {"ort-cpu (saved) vs reference"}
    # Other inputs (another seed) cannot be compared with the saved outputs: one clear line.
    code, out, err = cli("parity", str(built), "--runtimes", "reference", *SMALL, "--seed", "7", "--load-outputs", str(saved))
    assert code == 2 and "made from other inputs" in err and len(err.strip().splitlines()) == 1


def test_saved_outputs_of_a_wrong_runtime_fail_the_run(built, tmp_path):
    """What a GPU machine's wrong outputs look like when judged here: the saved runtime fails by name."""
    saved = tmp_path / "cpu.npz"
    cli("parity", str(built), "--runtimes", "ort-cpu", *SMALL, "--no-properties", "--save-outputs", str(saved))
    outputs = Outputs.load(saved)
    key = next(k for k in outputs.arrays if k[1] == "seq17-b3")
    outputs.arrays[key] = outputs.arrays[key] * np.float32(1.01)
    outputs.save(saved)
    code, out, err = cli("parity", str(built), "--runtimes", "reference", *SMALL, "--no-properties", "--load-outputs", str(saved))
    assert code == 1 and "ort-cpu (saved)" in out and "seq17-b3" in out


def test_tolerance_override_and_strict(built):
    code, out, _ = cli("parity", str(built), "--runtimes", "ort-cpu", *SMALL, "--no-properties", "--tolerance", "1e-9")
    assert code == 1 and "FAIL" in out  # observed errors ~1e-7 exceed a 1e-9 bound
    code, out, _ = cli("parity", str(built), "--runtimes", "ort-cpu,ort-cuda", *SMALL, "--no-properties")
    assert code == 0  # an unavailable runtime is reported, not failed, without --strict
    code, out, _ = cli("parity", str(built), "--runtimes", "ort-cpu,ort-cuda", *SMALL, "--no-properties", "--strict")
    import onnxruntime

    cuda = "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    assert (code == 0) == cuda and (cuda or "ort-cuda unavailable" in out)


def test_parity_from_encoding_options_over_several_dtypes(tmp_path):
    code, out, err = cli("parity", "--encoding", "rope", "--head-dim", "8", "--heads", "1", "--dtype", "float16,bfloat16",
                         "--runtimes", "ort-cpu", "--seqs", "17", "--batches", "1", "--json", str(tmp_path / "r.json"))
    assert code == 0, out + err
    report = read_json(tmp_path / "r.json")
    assert set(report.graphs) == {"rope-float16", "rope-bfloat16"}
    assert {r.comparison.bound for r in report.results if r.graph == "rope-float16"} == {4e-3}


def write_bad_graph(tmp_path: Path, built: Path) -> Path:
    """A real manifest (carrying the edited graph's sha256) beside a graph whose inputs are renamed: the
    contract does not hold."""
    import hashlib
    import json

    import onnx

    model = onnx.load(built)
    model.graph.input[0].name = "q"
    model.graph.node[0].input[0] = "q"
    data = model.SerializeToString()
    (tmp_path / "renamed.onnx").write_bytes(data)
    manifest = json.loads(built.with_suffix(".json").read_text()) | {"sha256": hashlib.sha256(data).hexdigest()}
    (tmp_path / "renamed.json").write_text(json.dumps(manifest))
    return tmp_path / "renamed.onnx"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--runtimes", "ort-gpu"], "--runtimes 'ort-gpu': unknown runtime"),
        (["--runtimes", "ort-cpu,ort-cpu"], "named twice"),
        (["--tolerance", "float8=1"], "--tolerance 'float8=1'"),
        (["--tolerance", "-1"], "--tolerance '-1'"),
        (["--seqs", "0"], "--seqs '0'"),
        (["--batches", "a"], "--batches 'a'"),
        (["--load-outputs", "NOTNPZ"], "--load-outputs"),
        (["--head-dim", "8"], "encoding options go with --encoding"),
        (["--dtype", "float16"], "--dtype float16"),
        (["CONTRACT"], "do not match the rope contract"),
        (["NOTONNX"], "not an ONNX model"),
        (["NOMANIFEST"], "no manifest"),
        (["--json", "/proc/nope/r.json", "--seqs", "1", "--batches", "1", "--runtimes", "ort-cpu"], "--json /proc/nope/r.json"),
    ],
)
def test_bad_input_gives_one_clear_line(built, tmp_path, args, needle):
    (tmp_path / "NOTNPZ").write_text("no")
    (tmp_path / "notonnx.onnx").write_text("no")
    (tmp_path / "notonnx.json").write_text(built.with_suffix(".json").read_text())
    (tmp_path / "lonely.onnx").write_bytes(built.read_bytes())
    files = {"NOTNPZ": str(tmp_path / "NOTNPZ"), "NOTONNX": str(tmp_path / "notonnx.onnx"), "NOMANIFEST": str(tmp_path / "lonely.onnx")}
    if "CONTRACT" in args:
        files["CONTRACT"] = str(write_bad_graph(tmp_path, built))
    args = [files.get(a, a) for a in args]
    graph = [] if args[0].endswith(".onnx") else [str(built)]
    code, out, err = cli("parity", *graph, *args)
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert "Traceback" not in out + err


def test_saved_outputs_of_another_graph_are_refused(built, tmp_path):
    saved = tmp_path / "cpu.npz"
    cli("parity", str(built), "--runtimes", "ort-cpu", *SMALL, "--no-properties", "--save-outputs", str(saved))
    code, out, err = cli("parity", "--encoding", "rope", "--head-dim", "16", "--heads", "2", "--dtype", "float16", "--runtimes", "reference",
                         *SMALL, "--no-properties", "--load-outputs", str(saved))
    assert code == 2 and "no saved output matches" in err and len(err.strip().splitlines()) == 1


def test_parity_of_a_preset_with_an_override(tmp_path):
    code, out, err = cli("parity", "--preset", "llama-3.1-8b", "--heads", "2", "--runtimes", "ort-cpu", "--seqs", "17",
                         "--batches", "1", "--no-properties", "--json", str(tmp_path / "r.json"))
    assert code == 0, out + err
    (manifest,) = read_json(tmp_path / "r.json").graphs.values()
    assert manifest["params"]["scaling"] == "llama3" and manifest["params"]["heads"] == 2
    code, out, err = cli("parity", str(tmp_path / "absent.onnx"), "--preset", "llama-3.1-8b")
    assert code == 2 and "--preset: encoding options go with --encoding" in err
