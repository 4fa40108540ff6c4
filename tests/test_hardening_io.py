"""Untrusted graphs, manifests, names and destinations (issue 11, items 1, 2, 5, 9, 10, 11 and part of 12):
each is refused with exactly one `error:` line and exit 2 before anything runs or is written, and the
.onnx/.json pair a build writes is always one build's pair, whatever interrupts or races it."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from posexport import export
from posexport.errors import PosexportError

from .conftest import ROOT, artifact
from .test_parity_cli import cli

CHEAP = ["--runtimes", "reference", "--seqs", "1", "--batches", "1", "--no-properties"]
SECRET = "posexport-secret-bytes-0123456789"


def one_error(code: int, out: str, err: str, needle: str) -> str:
    """Exit 2, one `error:` line naming ``needle``, nothing else on stderr, no traceback anywhere."""
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    assert "Traceback" not in out + err
    return lines[0]


def no_leftovers(folder: Path) -> list[str]:
    """Temporaries and lock files a writer left in ``folder``."""
    return [p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".lock"))]


@pytest.fixture(scope="module")
def small() -> export.Artifact:
    return artifact("rope", head_dim=8, heads=1, max_positions=64)


def save_pair(folder: Path, model: onnx.ModelProto, manifest: dict, name: str = "g", sha: bool = True) -> Path:
    """A graph and its manifest as files; with ``sha`` the manifest carries the graph's sha256."""
    data = model.SerializeToString()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.onnx").write_bytes(data)
    if sha:
        manifest = {**manifest, "sha256": hashlib.sha256(data).hexdigest()}
    (folder / f"{name}.json").write_text(json.dumps(manifest))
    return folder / f"{name}.onnx"


# --- 1: external data, and a manifest that is not the graph's ---------------------------------------


def external(name: str) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, data_type=onnx.TensorProto.FLOAT, dims=[len(SECRET) // 4])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="secret.txt")
    return tensor


def in_initializer(model: onnx.ModelProto) -> None:
    table = model.graph.initializer[0]
    table.ClearField("raw_data")
    table.ClearField("float_data")
    table.data_location = onnx.TensorProto.EXTERNAL
    table.external_data.add(key="location", value="secret.txt")


def in_constant(model: onnx.ModelProto) -> None:
    model.graph.node.append(oh.make_node("Constant", [], ["leak"], value=external("leak")))


def in_function(model: onnx.ModelProto) -> None:
    model.functions[0].node.append(oh.make_node("Constant", [], ["leak"], value=external("leak")))


def in_sparse_initializer(model: onnx.ModelProto) -> None:
    indices = onnx.numpy_helper.from_array(np.array([0], dtype=np.int64), "leak_indices")
    model.graph.sparse_initializer.append(oh.make_sparse_tensor(external("leak"), indices, [8]))


def in_subgraph(model: onnx.ModelProto) -> None:
    branch = oh.make_graph([], "branch", [], [], initializer=[external("leak")])
    model.graph.node.append(oh.make_node("If", ["cond"], ["leak"], then_branch=branch, else_branch=branch))


@pytest.mark.parametrize("place", [in_initializer, in_constant, in_function, in_sparse_initializer, in_subgraph])
def test_a_graph_with_external_data_is_refused_before_any_runtime_reads_it(small, tmp_path, monkeypatch, place):
    (tmp_path / "secret.txt").write_text(SECRET)
    monkeypatch.chdir(tmp_path)  # where onnxruntime and OpenVINO would resolve the location
    model = onnx.ModelProto()
    model.CopyFrom(small.model)
    place(model)
    path = save_pair(tmp_path / "crafted", model, small.manifest)  # a consistent pair: only the data is wrong
    with pytest.raises(PosexportError, match="external data .*'secret.txt'"):
        export.load(path)
    code, out, err = cli("parity", str(path), "--runtimes", "ort-cpu,reference,openvino", "--seqs", "1", "--batches", "1",
                         "--save-outputs", str(tmp_path / "o.npz"))
    one_error(code, out, err, "is stored as external data")
    assert SECRET not in out + err and not (tmp_path / "o.npz").exists()


def test_a_manifest_whose_sha256_is_not_the_graphs_is_refused(small, tmp_path):
    model = onnx.ModelProto()
    model.CopyFrom(small.model)
    model.doc_string = "edited after the build"
    path = save_pair(tmp_path, model, small.manifest, sha=False)
    code, out, err = cli("parity", str(path), *CHEAP)
    one_error(code, out, err, "sha256")
    (tmp_path / "g.json").write_text(json.dumps({k: v for k, v in small.manifest.items() if k != "sha256"}))
    one_error(*cli("parity", str(path), *CHEAP), "sha256 = null")


# --- 5: parity's tolerance and a manifest's fields --------------------------------------------------


@pytest.mark.parametrize("tolerance", ["inf", "nan", "-1e-3", "0", "float16=inf", "float32=nan"])
def test_parity_refuses_a_tolerance_that_passes_everything(small, tmp_path, tolerance):
    path, _ = export.save(small, tmp_path)
    one_error(*cli("parity", str(path), *CHEAP, "--tolerance", tolerance), f"--tolerance '{tolerance}'")


def test_python_users_get_the_same_tolerance_and_seed_checks(small):
    from posexport.verdicts import run_parity

    for settings, needle in [(dict(tolerance=float("inf")), "--tolerance inf"), (dict(tolerance={"float32": float("nan")}), "float32=nan"),
                             (dict(tolerance=0.0), "--tolerance 0.0"), (dict(seed=-1), "--seed -1")]:
        with pytest.raises(PosexportError, match=needle):
            run_parity(small, ["reference"], seqs=(1,), batches=(1,), **settings)


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("opset", "18", 'opset = "18"'),
        ("opset", 99, "opset = 99"),
        ("opset", 3, "opset = 3"),
        ("opset", True, "opset = true"),
        ("opset", 18.0, "opset = 18.0"),
        ("backend", "auto", 'backend = "auto"'),
        ("backend", "magic", 'backend = "magic"'),
        ("backend", None, "backend = null"),
        ("source", "jit", 'source = "jit"'),
        ("dtype", "float8", 'dtype = "float8"'),
        ("encoding", ["rope"], 'encoding = ["rope"]'),
        ("params", "head_dim=8", "params = "),
    ],
)
def test_a_manifest_with_a_nonsense_field_is_one_line(small, tmp_path, field, value, needle):
    path = save_pair(tmp_path, small.model, {**small.manifest, field: value})
    line = one_error(*cli("parity", str(path), *CHEAP), needle)
    assert str(tmp_path / "g.json") in line


def learned_with_weights(tmp_path: Path) -> tuple[export.Artifact, Path]:
    weights = tmp_path / "w.npy"
    np.save(weights, np.random.default_rng(0).standard_normal((16, 4)))
    return export.build("learned", {"weights": str(weights)}), weights


@pytest.mark.parametrize(
    "weights, digest, needle",
    [
        ("w.npy", None, "params.weights = \"w.npy\": expected an absolute path"),
        ("w.npy", "SHA", "params.weights = \"w.npy\": expected an absolute path"),
        ("ABS", None, "params.weights_sha256 = null"),
        ("ABS", "not-a-digest", 'params.weights_sha256 = "not-a-digest"'),
    ],
)
def test_a_manifest_with_unpinned_weights_is_refused(tmp_path, monkeypatch, weights, digest, needle):
    art, file = learned_with_weights(tmp_path)
    monkeypatch.chdir(tmp_path)  # where a relative path would be resolved
    params = {**art.manifest["params"], "weights": str(file) if weights == "ABS" else weights,
              "weights_sha256": art.manifest["params"]["weights_sha256"] if digest == "SHA" else digest}
    path = save_pair(tmp_path / "g", art.model, {**art.manifest, "params": params})
    one_error(*cli("parity", str(path), *CHEAP), needle)
    export.save(art, tmp_path / "ok")  # as built: pinned by absolute path and sha256, loads
    assert export.load(tmp_path / "ok" / "learned.onnx").params == art.params


# --- 9: seeds, saved outputs, deep manifests, destinations ------------------------------------------


def test_parity_refuses_a_negative_seed(small, tmp_path):
    path, _ = export.save(small, tmp_path)
    one_error(*cli("parity", str(path), *CHEAP, "--seed", "-1"), "--seed -1")


@pytest.mark.parametrize("kind", ["npy", "json", "folder", "deep-index", "bad-index"])
def test_load_outputs_that_are_not_saved_outputs_are_one_line(small, tmp_path, kind):
    path, _ = export.save(small, tmp_path)
    target = tmp_path / f"saved.{kind}"
    if kind == "npy":
        np.save(target, np.zeros(3))
    elif kind == "json":
        target.write_text("{}")
    elif kind == "folder":
        target.mkdir()
    else:
        index = "[" * 100_000 if kind == "deep-index" else json.dumps({"outputs": 3, "digests": [], "graphs": {}})
        with open(target, "wb") as f:
            np.savez(f, index=np.array(index))
    one_error(*cli("parity", str(path), *CHEAP, "--load-outputs", str(target)), "--load-outputs")


def test_a_manifest_nested_100k_deep_is_one_line(small, tmp_path):
    path = save_pair(tmp_path, small.model, small.manifest)
    (tmp_path / "g.json").write_text("[" * 100_000 + "]" * 100_000)
    one_error(*cli("parity", str(path), *CHEAP), "nested too deeply")
    (tmp_path / "g.json").write_bytes(b"\xff\xfe binary")
    one_error(*cli("parity", str(path), *CHEAP), "not a posexport manifest")
    (tmp_path / "g.json").write_text("[1, 2]")
    one_error(*cli("parity", str(path), *CHEAP), "expected a JSON object")


@pytest.mark.parametrize("option", ["--json", "--junit", "--markdown", "--save-outputs"])
@pytest.mark.parametrize("where", ["/nonexistent/x.out", "FOLDER", "FILE/x.out"])
def test_parity_checks_its_destinations_before_the_sweep(small, tmp_path, monkeypatch, option, where):
    import posexport.options

    def sweep(*args, **kwargs):
        raise AssertionError("the sweep ran before the destination was checked")

    monkeypatch.setattr(posexport.options, "run_parity", sweep)
    path, _ = export.save(small, tmp_path)
    (tmp_path / "FILE").write_text("a file, not a folder")
    destination = where.replace("FOLDER", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))
    one_error(*cli("parity", str(path), *CHEAP, option, destination), f"{option} {destination}")


# --- 2: --name is a plain file stem ------------------------------------------------------------------


BAD_NAMES = ["../../escape", "ABSOLUTE", ".", "..", "sub/x", "", "a\x00b", "a\\b", "line\nbreak", "x" * 201]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_build_name_is_a_plain_file_stem(tmp_path, name):
    out = tmp_path / "a" / "b"
    name = name.replace("ABSOLUTE", str(tmp_path / "absolute"))
    code, stdout, err = cli("build", "--head-dim", "8", "--heads", "1", "--out", str(out), "--name", name)
    one_error(code, stdout, err, "--name")
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    with pytest.raises(PosexportError, match="--name"):
        export.save(artifact("rope", head_dim=8, heads=1), out, name)


@pytest.mark.parametrize("name", ["../../escape", "ABSOLUTE", ".", "..", "sub/x", ""])
def test_extend_name_is_a_plain_file_stem(tmp_path, name):
    name = name.replace("ABSOLUTE", str(tmp_path / "absolute"))
    np.save(tmp_path / "w.npy", np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32))
    source = tmp_path / "a" / "b"
    export.save(export.build("learned", {"d_model": 4, "max_positions": 8}), source)
    for given in (source / "learned.onnx", tmp_path / "w.npy"):
        one_error(*cli("extend", str(given), "--to", "12", "--name", name), "--name")
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["learned.json", "learned.onnx", "w.npy"]


def test_a_plain_name_still_builds(tmp_path):
    code, out, err = cli("build", "--head-dim", "8", "--heads", "1", "--out", str(tmp_path), "--name", "my.rope-v2")
    assert code == 0, out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my.rope-v2.json", "my.rope-v2.onnx"]


# --- 10: the pair is one build's pair ----------------------------------------------------------------


def assert_pair(folder: Path, name: str) -> dict:
    manifest = json.loads((folder / f"{name}.json").read_text())
    assert manifest["sha256"] == hashlib.sha256((folder / f"{name}.onnx").read_bytes()).hexdigest()
    export.load(folder / f"{name}.onnx")
    return manifest


def test_concurrent_writers_of_one_name_leave_one_writers_pair(tmp_path):
    arts = [artifact("rope", head_dim=8, heads=1), artifact("rope", head_dim=16, heads=2)]
    for _ in range(5):
        start = threading.Barrier(len(arts))

        def write(art):
            start.wait()
            for _ in range(20):
                export.save(art, tmp_path, "same")

        threads = [threading.Thread(target=write, args=(art,)) for art in arts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert_pair(tmp_path, "same")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same.json", "same.onnx"]


LOOP = """
import sys
from posexport_cli.main import main
for _ in range(int(sys.argv[1])):
    sys.argv = ["posexport", "build", *sys.argv[2:]]
    try:
        main()
    except SystemExit as e:
        assert not e.code, e.code
"""


def worktree_python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    """This checkout's CLI in a fresh process (the installed command may run another checkout's code)."""
    paths = [str(ROOT), str(ROOT / "cli_shim"), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kwargs)


def test_two_processes_building_one_name_leave_a_matching_pair(tmp_path):
    builds = [["--head-dim", "8", "--heads", "1"], ["--head-dim", "16", "--heads", "4", "--dtype", "float16"]]
    procs = [worktree_python(LOOP, "6", *args, "--out", str(tmp_path), "--name", "same") for args in builds]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    manifest = assert_pair(tmp_path, "same")
    assert manifest["params"]["head_dim"] in (8, 16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same.json", "same.onnx"]


def test_a_failed_manifest_write_leaves_the_previous_pair(tmp_path):
    export.save(artifact("rope", head_dim=8, heads=1), tmp_path)
    before = (tmp_path / "rope.onnx").read_bytes()
    (tmp_path / "rope.json").unlink()
    (tmp_path / "rope.json").mkdir()  # the manifest cannot be replaced
    one_error(*cli("build", "--head-dim", "16", "--heads", "2", "--out", str(tmp_path)), "--out")
    assert (tmp_path / "rope.onnx").read_bytes() == before and not no_leftovers(tmp_path)


# --- 11: interrupted builds leave no temporaries -----------------------------------------------------


BIG = ["--encoding", "learned", "--d-model", "256", "--max-positions", "32768"]  # a 32 MB table: a write that takes a while


def kill_while_writing(folder: Path, sig: int) -> subprocess.CompletedProcess:
    """A large build into ``folder``, sent ``sig`` while its graph's temporary is being written."""
    proc = worktree_python("from posexport_cli.main import main; main()", "build", *BIG, "--out", str(folder))
    seen = False
    while proc.poll() is None and not seen:
        seen = folder.is_dir() and any(n.startswith(".learned.onnx.") and n.endswith(".tmp") for n in os.listdir(folder))
        if not seen:
            time.sleep(0.0005)
    if seen:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert seen, f"the build ended before its temporary was seen: {out} {err}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_sigterm_during_a_build_leaves_no_temporary(tmp_path):
    done = kill_while_writing(tmp_path, signal.SIGTERM)
    assert done.returncode == 128 + signal.SIGTERM and "Traceback" not in done.stderr, done.stderr
    assert not no_leftovers(tmp_path)
    if (tmp_path / "learned.json").exists():  # the signal came after the renames began: still a pair
        assert_pair(tmp_path, "learned")


def test_temporaries_of_a_killed_build_are_removed_by_the_next_build(tmp_path):
    done = kill_while_writing(tmp_path, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    left = [n for n in no_leftovers(tmp_path) if n.endswith(".tmp")]
    assert left, "SIGKILL left no temporary to clean up"
    code, out, err = cli("build", "--encoding", "learned", "--d-model", "4", "--max-positions", "8", "--out", str(tmp_path))
    assert code == 0, out + err
    assert not no_leftovers(tmp_path)
    assert_pair(tmp_path, "learned")


def test_only_posexports_own_temporaries_of_that_name_are_removed(tmp_path):
    stale = [".rope.onnx.abcd_123.tmp", ".rope.json.zz9xq0ab.tmp"]
    kept = [".rope.onnx.tmp", ".rope.onnx.ABCDEFGH.tmp", ".other.onnx.abcd1234.tmp", "rope.onnx.abcd1234.tmp",
            ".rope.onnx.abcd1234.tmp.bak", "notes.tmp"]
    for name in stale + kept:
        (tmp_path / name).write_text("x")
    (tmp_path / ".rope.json.dir12345.tmp").mkdir()
    (tmp_path / ".rope.onnx.link1234.tmp").symlink_to(tmp_path / "notes.tmp")
    code, out, err = cli("build", "--head-dim", "8", "--heads", "1", "--out", str(tmp_path))
    assert code == 0, out + err
    left = sorted(p.name for p in tmp_path.iterdir())
    assert not set(stale) & set(left)
    assert set(kept) | {".rope.json.dir12345.tmp", ".rope.onnx.link1234.tmp", "rope.json", "rope.onnx"} == set(left)


# --- 12 (part): warnings never precede `error:` -------------------------------------------------------


def noisy_failure(*args, **kwargs):
    import logging

    warnings.warn("a library's warning", UserWarning)
    np.array([1e300]).astype(np.float32)  # numpy: overflow encountered in cast
    logging.getLogger("posexport.test.unconfigured").warning("a library's logged warning")
    raise PosexportError("--head-dim 7: the user's mistake")


def to_stderr(message, category, filename, lineno, file=None, line=None):
    """Python's own way of showing a warning (pytest records them instead)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@pytest.mark.parametrize("verbose", [False, True])
def test_warnings_never_precede_the_error_line(monkeypatch, verbose):
    import posexport.options

    monkeypatch.setattr(posexport.options, "build_from_options", noisy_failure)
    monkeypatch.setattr(warnings, "showwarning", to_stderr)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code, out, err = cli(*(["--verbose"] if verbose else []), "build", "--head-dim", "7")
    if verbose:  # asked for: shown, and the error is still the last line
        assert code == 2 and "a library's warning" in err and err.strip().splitlines()[-1].startswith("error: --head-dim 7")
    else:
        one_error(code, out, err, "--head-dim 7: the user's mistake")
