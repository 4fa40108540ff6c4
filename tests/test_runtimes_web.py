"""The browser runtimes (ort-web-wasm, ort-webgpu: onnxruntime-web in a headless Chromium): the first-use
install's refusal without npm, the wire, a browser that is absent, a tab killed mid-run, a whole exported
model against float64 transformers, and no browser process outliving the process that started it
(Ctrl-C, a crash). Their parity on built graphs is in test_runtimes.py and test_conformance.py; the full
matrix is `make web-conformance` (docs/runtimes.md)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import posexport
from posexport.contract import Artifact, BuildOptions
from posexport.dtypes import get_dtype
from posexport.runtimes import RUNTIMES, browser as web, get_runtime
from posexport.runtimes.ort_web import OrtWeb, install, pack, pinned_version, unpack
from posexport.reports.parity import strict_line
from posexport.verdicts import CaseResult, FeedCase, Report, model_parity
from posexport.verdicts.graphs import judge

from . import surgery_fixtures as sf
from .conftest import ROOT, posexport_cli

BROWSER_RUNTIMES = [name for name, rt in RUNTIMES.items() if isinstance(rt, OrtWeb)]


def available_or_skip(runtime: OrtWeb) -> OrtWeb:
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"{runtime.name} unavailable: {why}")
    return runtime


def living() -> dict[int, tuple[int, bytes]]:
    """pid -> (process group, command line) of every process that has not exited (a zombie has: where PID 1
    does not reap orphans, as in some containers, the dead stay listed)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if fields[0] not in ("Z", "X"):
                found[int(entry)] = (int(fields[2]), cmdline)
    return found


def processes_of(marker: str) -> list[int]:
    """Living processes whose command line holds ``marker`` (a browser profile's name)."""
    return [pid for pid, (_, cmdline) in living().items() if marker.encode() in cmdline]


def wait_gone(pids: list[int], seconds: float = 15) -> list[int]:
    """The pids still living after ``seconds`` at most."""
    deadline = time.monotonic() + seconds
    while (alive := [pid for pid in pids if pid in living()]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def test_the_registry_has_both_browser_runtimes_outside_the_default_set():
    assert BROWSER_RUNTIMES == ["ort-web-wasm", "ort-webgpu"]
    assert all(not RUNTIMES[name].runs_by_default for name in BROWSER_RUNTIMES)
    assert pinned_version() and (ROOT / "posexport/runtimes/web/package-lock.json").is_file()
    import tomllib

    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["posexport.runtimes.web"]
    assert {"package.json", "package-lock.json", "page.html", "page.mjs"} <= set(shipped)


def test_without_npm_the_install_says_so_and_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm here
    dist, why = install(tmp_path / "cache")
    assert dist is None and why.startswith("npm not found") and "apt-get install -y npm" in why
    assert not (tmp_path / "cache").exists()


def test_tensors_cross_as_raw_bytes_and_come_back_equal(rng):
    arrays = {"x": rng.standard_normal((3, 5, 7)).astype(np.float16), "ids": rng.integers(-9, 10**12, (2, 3)),
              "mask": rng.random(5) > 0.5, "y": rng.standard_normal(1).astype(np.float32)}
    blob = pack(arrays)
    assert len(blob) < sum(a.nbytes for a in arrays.values()) + 300  # bytes and a small header, no JSON numbers
    back = unpack(blob)
    assert list(back) == list(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array)


def test_devtools_messages_of_every_length_cross_whole():
    """The websocket's three length forms (7-bit, 16-bit, 64-bit) and a message split over many reads."""
    page = available_or_skip(get_runtime("ort-web-wasm")).page()
    for n in (5, 300, 70_000, 3_000_000):
        assert page.tab.evaluate(f"'ab'.repeat({n})", 30) == "ab" * n


def test_a_child_joins_this_processs_browser_and_another_binary_never_does(tmp_path):
    """Pickled for a whole model's child process, a runtime carries the DevTools address of the browser this
    process runs for its binary (one browser per run); named with another binary, it carries none."""
    found = available_or_skip(get_runtime("ort-web-wasm")) and web.find_browser()[0]
    crossed = pickle.loads(pickle.dumps(get_runtime("ort-web-wasm")))
    assert crossed.endpoint == web.running(found).endpoint and crossed.endpoint.startswith("ws://127.0.0.1:")
    link = tmp_path / "chromium"
    link.symlink_to(found)
    other = get_runtime("ort-web-wasm", link)
    assert other.browser == str(link) and other.endpoint is None
    assert pickle.loads(pickle.dumps(other)).endpoint is None


@pytest.mark.parametrize("name", BROWSER_RUNTIMES)
def test_an_absent_browser_is_an_unavailable_runtime_and_strict_fails(name, tmp_path, monkeypatch):
    before = dict(web.BROWSERS)
    missing = get_runtime(name, tmp_path / "no-chromium")
    ok, why = missing.available()
    assert not ok and str(tmp_path / "no-chromium") in why and "does not exist" in why
    monkeypatch.setenv("PATH", str(tmp_path))  # no chromium on PATH either
    ok, why = get_runtime(name).available()
    assert not ok and why.startswith("no Chromium found") and "--browser PATH" in why
    monkeypatch.undo()
    posexport_cli("build", "--encoding", "rope", "--head-dim", "8", "--heads", "1", "--out", tmp_path, check=True)
    graph = tmp_path / "rope.onnx"
    args = ("parity", graph, "--runtimes", f"ort-cpu,{name}", "--browser", tmp_path / "no-chromium", "--seqs", "1", "--batches", "1")
    lenient, strict = posexport_cli(*args), posexport_cli(*args, "--strict")
    assert lenient.returncode == 0 and f"{name} unavailable" in lenient.stdout and "does not exist" in lenient.stdout
    assert strict.returncode == 1 and "FAIL (--strict)" in strict.stdout
    assert web.BROWSERS == before  # nothing was started


@pytest.mark.parametrize("name", BROWSER_RUNTIMES)
def test_a_model_over_webassemblys_memory_is_unsupported_with_the_reason(name, tmp_path):
    """4.5 GiB of weights (a sparse file: no disk used) cannot load into WebAssembly's 4 GiB."""
    rows = (9 << 30) // 2 // 4 // 1024  # 4.5 GiB of float32 [rows, 1024]
    weight = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[rows, 1024], data_location=onnx.TensorProto.EXTERNAL)
    for key, value in (("location", "big.data"), ("offset", "0"), ("length", str(rows * 1024 * 4))):
        weight.external_data.add(key=key, value=value)
    graph = oh.make_graph([oh.make_node("Gather", ["w", "i"], ["y"])], "big", [oh.make_tensor_value_info("i", onnx.TensorProto.INT64, [1])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1024])], [weight])
    onnx.save_model(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10), tmp_path / "big.onnx")
    with open(tmp_path / "big.data", "wb") as f:
        f.truncate(rows * 1024 * 4)
    ok, why = get_runtime(name).supports_model(tmp_path / "big.onnx")
    assert not ok and "4.5 GiB" in why and "over the 4 GiB that onnxruntime-web's WebAssembly memory can hold" in why


def slow_graph(n: int = 1024, layers: int = 40) -> Artifact:
    """x [m, n] times W, `layers` times: seconds of WebAssembly at m = n, an instant at m = 1."""
    w = (np.random.default_rng(0).standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    nodes = [oh.make_node("MatMul", ["x" if i == 0 else f"h{i - 1}", "w"], [f"h{i}"]) for i in range(layers)]
    nodes.append(oh.make_node("Identity", [f"h{layers - 1}"], ["y"]))
    graph = oh.make_graph(nodes, "slow", [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["m", n])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["m", n])], [onnx.numpy_helper.from_array(w, "w")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10)
    return Artifact(model, {}, None, None, BuildOptions(get_dtype("float32"), 18)), w


def group_of(chromium: web.Chromium) -> list[int]:
    return [pid for pid, (group, _) in living().items() if group == chromium.process.pid]


def renderers(chromium: web.Chromium) -> list[int]:
    return [pid for pid, (group, cmdline) in living().items() if group == chromium.process.pid and b"--type=renderer" in cmdline]


@contextlib.contextmanager
def renderers_killed(chromium: web.Chromium) -> Iterator[None]:
    """From a second on, the browser's renderers are killed (again every 0.2 s, so that a busy machine cannot
    slip one past) until the block ends; the killer has stopped when it does."""
    done = threading.Event()

    def kill() -> None:
        done.wait(1.0)
        while not done.is_set():
            for pid in renderers(chromium):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            done.wait(0.2)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        yield
    finally:
        done.set()
        killer.join()


def slow_session_of_its_own(tmp_path: Path):
    """A browser of its own (its binary named through a link) with the slow graph loaded on ort-web-wasm:
    (session, its Chromium, the link, the graph's weight)."""
    found, why = web.find_browser()
    if found is None:
        pytest.skip(why)
    link = tmp_path / "chromium"
    link.symlink_to(found)
    runtime = available_or_skip(get_runtime("ort-web-wasm", link))
    art, w = slow_graph()
    return runtime.load(art), web.running(link).chromium, link, w


def test_a_tab_killed_mid_run_is_a_failed_run_then_a_fresh_tab_and_nothing_is_left(tmp_path):
    """A browser of its own (its binary named through a link), its renderer killed while a run is under way."""
    session, chromium, link, w = slow_session_of_its_own(tmp_path)
    x = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    started = time.monotonic()
    with renderers_killed(chromium), pytest.raises(web.TabCrashed, match="ort-web-wasm tab crashed while it ran posexport.run"):
        session.run({"x": x})
    assert time.monotonic() - started < 30
    one = x[:1]
    expected = one.astype(np.float64)
    for _ in range(40):
        expected = expected @ w.astype(np.float64)
    out = session.run({"x": one})  # a new tab, the session loaded again
    assert np.max(np.abs(out - expected)) / max(1.0, np.max(np.abs(expected))) < 1e-5
    pids = group_of(chromium)
    assert pids
    web.close(link)
    assert wait_gone(pids) == [] and not Path(chromium.profile).exists()


def test_a_crash_is_a_failed_row_that_plain_and_strict_verdicts_fail(tmp_path):
    """Judged as parity judges a case: the tab dies during it (its renderer killed), the row is an error naming
    the crash, and the verdict is FAIL with or without --strict."""
    session, chromium, link, _ = slow_session_of_its_own(tmp_path)
    with renderers_killed(chromium):
        result, out = judge(session.run, {"x": np.ones((1024, 1024), np.float32)}, np.zeros((1024, 1024)), 1e-6)
    assert result["status"] == "error" and out is None and result["message"].startswith("TabCrashed: the ort-web-wasm tab crashed")
    report = Report(results=[CaseResult("slow", "m1024", "ort-web-wasm", **result)])
    assert not report.passed and not report.strictly_passed()
    assert strict_line(report).startswith("FAIL: 0 passed, 0 failed, 1 error;")
    pids = group_of(chromium)
    web.close(link)
    assert wait_gone(pids) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_no_browser_outlives_the_process_that_started_it(sig):
    script = ("from posexport.runtimes import get_runtime\n"
              "ok, why = get_runtime('ort-web-wasm').available()\n"
              "print('up' if ok else 'unavailable: ' + why, flush=True)\n"
              "import time\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline().strip()
        if line != "up":
            pytest.skip(f"ort-web-wasm {line}")
        pids = processes_of(f"{web.PROFILE}{proc.pid}-")
        assert len(pids) >= 3  # the browser and its helpers
        proc.send_signal(sig)
        proc.wait(30)
        assert wait_gone(pids) == []
        # Killed, it could not remove its browser's profile: the next browser started anywhere does.
        left = list(Path(tempfile.gettempdir()).glob(f"{web.PROFILE}{proc.pid}-*"))
        assert len(left) == (1 if sig == signal.SIGKILL else 0)
        assert set(left) <= set(web.remove_stale_profiles()) and not any(folder.exists() for folder in left)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def genai_llama3(tmp_path_factory):
    """test_surgery_genai's tiny Llama-3 (GroupQueryAttention, do_rotary, 2048-row caches), patched to 8192 positions."""
    pytest.importorskip("onnxruntime_genai")
    folder = sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)
    model = sf.genai_export(folder)
    patched = tmp_path_factory.mktemp("web-patched") / "model.onnx"
    posexport.patch(model, patched, from_model=folder, position_limit=8192)
    return folder, model, patched


def test_a_patched_model_and_its_original_against_float64_transformers(genai_llama3):
    """model-parity on both browser runtimes (each session in a child process joining this process's
    browser): the patched model passes, logits and every layer's key and value caches, at a prompt and at a
    decode step past the original's 2048-row caches, where the original fails."""
    runtimes = [available_or_skip(get_runtime(name)) for name in BROWSER_RUNTIMES]
    folder, model, patched = genai_llama3
    report = model_parity(patched, against_hf=folder, original=model, runtimes=runtimes, cases=[FeedCase(16), FeedCase(1, 3000)])
    assert report.passed, [(r.runtime, r.case, r.output, r.message) for r in report.failures()]
    outputs = {r.output for r in report.results}
    assert "logits" in outputs and {"present.0.key", "present.1.value"} <= outputs
    assert {r.runtime for r in report.results} == set(BROWSER_RUNTIMES)
    late = [r for r in report.results if r.largest_position == 3000 and r.output.endswith("key")]
    assert {r.runtime for r in late} == set(BROWSER_RUNTIMES)
    assert all(r.original.startswith("fails: cos_cache dimension 0 shall not be less than total_sequence_length") for r in late)
    assert "onnxruntime-web " in report.notes["ort-webgpu"] and "adapter" in report.notes["ort-webgpu"]
