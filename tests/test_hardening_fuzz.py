"""The third hostile sweep (issue 33) as derandomized fuzz: report paths (inputs, files they reference,
links to them, one path twice), Hugging Face cache layouts, signals to the command, deadlines and
allocation budgets. Whatever is drawn, a command ends with its report (exit 0 or 1) or one `error:` line
(exit 2); never a traceback, never a write over an input, never a read outside the input's folder, no
process left behind. A few examples each: the classes' own tests are in tests/test_hardening_{writes,
processes,budgets}.py."""

from __future__ import annotations

import io
import json
import os
import signal
import tempfile
import time
import xml.sax
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_fuzz_surgery import watched
from .test_hardening_processes import ended, loop_model, outlived, posexport, workers
from .test_hardening_surgery import SECRET, snapshot
from .test_hardening_writes import genai_like, rope_graph  # noqa: F401 (fixtures)
from .test_parity_cli import cli


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])


def outcome(code: int, out: str, err: str) -> str:
    """'refused' (exit 2, one error line) or 'reported' (exit 0 or 1); never a traceback."""
    assert "Traceback" not in out + err, out + err
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        return "refused"
    assert code in (0, 1), (code, out, err)
    return "reported"


# --- report paths ---------------------------------------------------------------------------------------

INPUTS = ["model.onnx", "model.onnx.data", "genai_config.json", "tokenizer.json"]
# bench --model writes through the same writer (its own test: tests/test_hardening_writes.py); it is left out here
# for its timing runs' seconds.
REPORTS = {"doctor": ["--json", "--markdown"], "model-parity": ["--json", "--junit", "--markdown"],
           "parity": ["--json", "--junit", "--markdown", "--save-outputs"]}


def well_formed(option: str, path: Path) -> None:
    if option == "--json":
        json.loads(path.read_text())
    elif option == "--junit":
        xml.sax.parseString(path.read_bytes(), xml.sax.ContentHandler())
    elif option == "--markdown":
        assert path.read_text().startswith("#")
    else:
        assert path.read_bytes()[:2] == b"PK"


@fuzz(6)
@given(data=st.data())
def test_report_paths_never_write_over_what_the_command_reads(genai_like, rope_graph, data):  # noqa: F811
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder, graphs = root / "m", root / "g"
        for source, dest in ((genai_like.parent, folder), (rope_graph.parent, graphs)):
            dest.mkdir()
            for f in source.iterdir():
                (dest / f.name).write_bytes(f.read_bytes())
        command = data.draw(st.sampled_from(sorted(REPORTS)), label="command")
        model = folder / "model.onnx"
        args, inputs = {
            "doctor": (["doctor", str(model)], [folder / n for n in INPUTS]),
            "model-parity": (["model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu", "--prompt", "3",
                              "--random-ids"],
                             [folder / n for n in INPUTS]),
            "parity": (["parity", str(graphs / "rope.onnx"), "--runtimes", "ort-cpu", "--seqs", "3", "--no-properties"],
                       [graphs / "rope.onnx", graphs / "rope.json"]),
        }[command]
        options = data.draw(st.lists(st.sampled_from(REPORTS[command]), min_size=1, max_size=2, unique=True), label="options")
        destinations = []
        for option in options:
            kind = data.draw(st.sampled_from(["input", "symlink", "hard link", "new", "the other's"]), label="destination")
            target = data.draw(st.sampled_from(inputs), label="input")
            path = root / f"report{len(destinations)}"
            if kind == "input":
                path = target
            elif kind == "symlink":
                os.symlink(target, path)
            elif kind == "hard link":
                os.link(target, path)
            elif kind == "the other's" and destinations:
                path = destinations[0][1]
            destinations.append((option, path))
        before = {p.name: snapshot(p) for p in (folder, graphs)}
        code, out, err = cli(*args, *[a for option, path in destinations for a in (option, str(path))])
        overlaps = any(p.resolve() in {i.resolve() for i in inputs} or p.is_file() and os.stat(p).st_ino in {os.stat(i).st_ino for i in inputs}
                       for _, p in destinations) or len({p for _, p in destinations}) < len(destinations)
        assert outcome(code, out, err) == ("refused" if overlaps else "reported"), (destinations, out, err)
        assert {p.name: snapshot(p) for p in (folder, graphs)} == before
        if not overlaps:
            for option, path in destinations:
                well_formed(option, path)


# --- Hugging Face cache layouts -------------------------------------------------------------------------

# layout -> (where a blob really lies, relative to the temporary root; what the snapshot's symlink says)
LAYOUTS = {
    "hub": ("models--a--b/blobs", "../../blobs/{name}"),
    "blobs -> /": ("", "../../blobs{root}/{name}"),
    "blobs -> the cache's parent": ("", "../../blobs/{name}"),
    "blobs -> a sibling": ("sibling", "../../blobs/{name}"),
    "blob is a folder": ("models--a--b/blobs/sub", "../../blobs/sub"),
    "blob in a subfolder": ("models--a--b/blobs/sub", "../../blobs/sub/{name}"),
    "snapshot file -> ../../blobs/<absolute path>": ("", "../../blobs{root}/{name}"),
    "snapshot file -> ../../blobs/../../SECRET": ("", "../../blobs/../../SECRET"),
    "snapshots -> elsewhere": ("models--a--b/blobs", "../../blobs/{name}"),
}


def cache_layout(root: Path, layout: str, seed: int) -> Path:
    """A table t.npy and a model whose weights are in t.bin, as a Hugging Face cache laid out as ``layout``
    (only "hub" is the hub's own); the snapshot folder."""
    cache = root / "models--a--b"
    snap, blobs = cache / "snapshots" / "r", cache / "blobs"
    snap.mkdir(parents=True)
    store, link = LAYOUTS[layout]
    (root / store).mkdir(parents=True, exist_ok=True)
    if layout.startswith("blobs -> "):
        os.symlink(root / store if layout != "blobs -> /" else "/", blobs)
    else:
        blobs.mkdir(exist_ok=True)
    table = np.random.default_rng(seed).standard_normal((8, 4))
    buffer = io.BytesIO()
    np.save(buffer, table)
    graph = oh.make_graph([oh.make_node("Identity", ["w"], ["y"])], "g", [], [oh.make_tensor_value_info("y", 1, [8, 4])],
                          [onh.from_array(table.astype(np.float32), "w")])
    onnx.save(oh.make_model(graph), str(snap / "model.onnx"), save_as_external_data=True, location="t.bin", size_threshold=0)
    (root / store / "t.bin").write_bytes((snap / "t.bin").read_bytes())
    (snap / "t.bin").unlink()
    (root / store / "t.npy").write_bytes(buffer.getvalue())
    for name in ("t.npy", "t.bin"):
        os.symlink(link.format(root=root / store if store else root, name=name), snap / name)
    if layout == "snapshots -> elsewhere":
        os.rename(cache / "snapshots", root / "elsewhere")
        os.symlink(root / "elsewhere", cache / "snapshots")
    (root / "SECRET").write_text(SECRET)
    return snap


@fuzz(16)
@given(data=st.data())
def test_cache_layouts_never_switch_containment_off(data):
    layout = data.draw(st.sampled_from(list(LAYOUTS)), label="layout")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        snap = cache_layout(root, layout, data.draw(st.integers(0, 3), label="seed"))
        before = snapshot(snap)
        command = data.draw(st.sampled_from(["doctor", "patch", "build", "extend"]), label="command")
        args = {"doctor": ["doctor", str(snap / "model.onnx")], "patch": ["patch", str(snap / "model.onnx"), "--out", str(root / "o" / "p.onnx")],
                "build": ["build", "--encoding", "learned", "--weights", str(snap / "t.npy"), "--out", str(root / "o")],
                "extend": ["extend", str(snap / "t.npy"), "--to", "12", "--out", str(root / "o")]}[command]
        code, out, err, opened = watched(*args)
        result = outcome(code, out, err)
        assert not [p for p in opened if Path(p).resolve() in ((root / "SECRET").resolve(), Path("/etc/passwd"))], opened
        if layout == "hub":
            assert "outside" not in err, err
        else:  # every other shape is outside, whatever the command
            assert result == "refused" and "outside" in err, (layout, err)
        assert snapshot(snap) == before


# --- signals to the command -----------------------------------------------------------------------------


@fuzz(2)
@given(data=st.data())
def test_any_signal_to_the_command_leaves_no_process(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("loop")
    model = loop_model(folder / "loop.onnx")
    sig = data.draw(st.sampled_from([signal.SIGKILL, signal.SIGHUP, signal.SIGTERM, signal.SIGINT]), label="signal")
    which = data.draw(st.sampled_from(["model-parity", "bench"]), label="command")
    args = (["model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu"] if which == "model-parity" else
            ["bench", "--model", str(model), "--against", str(model), "--seqs", "4", "--warmup", "0", "--repeats", "3"])
    command = posexport(*args, "--timeout", "300")
    seen = workers(command, data.draw(st.integers(2, 3), label="processes before the signal"))
    time.sleep(data.draw(st.sampled_from([0.0, 0.3, 1.0]), label="delay"))
    command.send_signal(sig)
    code, out, err = ended(command, seen)
    assert "Traceback" not in err, err
    left = outlived(seen)
    assert not left, (sig, which, code, err)


# --- deadlines ------------------------------------------------------------------------------------------


@fuzz(2)
@given(data=st.data())
def test_every_runtime_call_ends_by_its_deadline(data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("deadline")
    loop = loop_model(folder / "loop.onnx")
    timeout = data.draw(st.sampled_from([0.5, 1.0]), label="timeout")
    past = data.draw(st.sampled_from([[], ["--prompt", "2"], ["--prompt", "2", "--prompt", "5"]]), label="cases")
    started = time.monotonic()
    code, out, err = cli("model-parity", "--model", str(loop), "--against", str(loop), "--runtimes", "ort-cpu", "--timeout", str(timeout),
                         *past, "--json", str(folder / "r.json"))
    assert outcome(code, out, err) == "reported" and code == 1
    rows = json.loads((folder / "r.json").read_text())["results"]
    assert rows and all(f"ran past the --timeout of {timeout:g} s" in r["message"] for r in rows), rows
    assert time.monotonic() - started < 60


# --- allocation budgets ---------------------------------------------------------------------------------

SIZES = [1, 3, 16, 1 << 20, 10 ** 9, 10 ** 12]


def wide_model(path: Path, dims: list[int], output: int) -> Path:
    """x of fixed ``dims`` (float32) and an output of ``output`` values made in the graph."""
    graph = oh.make_graph([oh.make_node("ConstantOfShape", ["shape"], ["y"], value=onh.from_array(np.array([1.0], np.float32)))], "g",
                          [oh.make_tensor_value_info("x", 1, dims)], [oh.make_tensor_value_info("y", 1, None)],
                          [onh.from_array(np.array([output], np.int64), "shape")])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), str(path))
    return path


@fuzz(16)
@given(data=st.data())
def test_allocation_budgets_hold_whatever_the_sizes(data, monkeypatch, tmp_path_factory):
    import torch

    folder = tmp_path_factory.mktemp("budget")
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", data.draw(st.sampled_from(["64K", "1M", "8M", "2G"]), label="budget"))
    what = data.draw(st.sampled_from(["feeds", "outputs", "npy", "pt"]), label="what")
    if what in ("feeds", "outputs"):
        dims = data.draw(st.lists(st.sampled_from(SIZES[:4] + [1 << 40]), min_size=1, max_size=3), label="dims") if what == "feeds" else [1, 4]
        model = wide_model(folder / "m.onnx", dims, data.draw(st.sampled_from([4, 1 << 16, 1 << 20, 1 << 22]), label="output"))
        cases = data.draw(st.lists(st.sampled_from(SIZES), max_size=2), label="prompts")
        args = ["model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu", "--timeout", "60",
                *[a for n in cases for a in ("--prompt", str(n))]]
    else:
        shape = data.draw(st.lists(st.sampled_from([1, 8, 1 << 12, 1 << 20, 1 << 40]), min_size=1, max_size=2), label="shape")
        if what == "npy":
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(header, {"descr": "|i1", "fortran_order": False, "shape": tuple(shape)})
            stored = int(np.prod(shape, dtype=object)) if np.prod(shape, dtype=object) <= 1 << 22 else 64
            (folder / "w.npy").write_bytes(header.getvalue() + bytes(stored))
        else:
            torch.save({"w": torch.zeros(1, dtype=torch.int8).expand(*shape)}, folder / "w.pt")
        args = ["build", "--encoding", "learned", "--weights", str(folder / f"w.{what}"), "--out", str(folder / "out")]
    code, out, err = cli(*args)
    if outcome(code, out, err) == "refused" and "limit" in err:
        assert "POSEXPORT_MAX_BYTES" in " ".join(err.split()), err
