"""Processes that end with the command, and deadlines on every runtime call (issue 33, classes C and D,
and F's process tracebacks): the fork server and every child die when the command is killed outright
(SIGKILL) or its terminal closes (SIGHUP), and the caller's pipes close, also under a TMPDIR too deep for
a socket path; a Loop of 2^62 iterations or a stopped child is a failed row once --timeout passes; a
refusal raised in bench's child is one line, not a traceback.

The signalled commands run as real processes (a few seconds each, most of it the fork server importing
onnxruntime), bounded by a wall-clock limit of their own; the rest run in this process."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from .test_hardening_isolation import gqa_decoder
from .test_parity_cli import cli

WALL = 120  # seconds any command here may take before the test calls it hung


def loop_model(path: Path) -> Path:
    """x [batch, seq] → Loop of 2^62 iterations adding 1 → y: onnxruntime runs it for ever."""
    f32, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    body = oh.make_graph([oh.make_node("Identity", ["cond_in"], ["cond_out"]), oh.make_node("Add", ["acc_in", "one"], ["acc_out"])], "body",
                         [oh.make_tensor_value_info("i", i64, []), oh.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
                          oh.make_tensor_value_info("acc_in", f32, None)],
                         [oh.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []), oh.make_tensor_value_info("acc_out", f32, None)],
                         [onh.from_array(np.array(1.0, np.float32), "one")])
    graph = oh.make_graph([oh.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body)], "loop",
                          [oh.make_tensor_value_info("x", f32, ["batch", "seq"])], [oh.make_tensor_value_info("y", f32, ["batch", "seq"])],
                          [onh.from_array(np.array(2 ** 62, np.int64), "trips"), onh.from_array(np.array(True), "cond")])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("models")
    onnx.save(gqa_decoder(False), str(folder / "good.onnx"))
    return {"loop": loop_model(folder / "loop.onnx"), "good": folder / "good.onnx"}


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rpartition(b")")[2].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def descendants(root: int) -> list[int]:
    table = process_table()
    found, todo = [], [root]
    while todo:
        parent = todo.pop()
        children = [pid for pid, (ppid, _) in table.items() if ppid == parent]
        found += children
        todo += children
    return found


def alive(pids: list[int]) -> list[int]:
    """Those still running (a zombie left to a container's init holds nothing and runs nothing)."""
    table = process_table()
    return [pid for pid in pids if pid in table and table[pid][1] != "Z"]


def posexport(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "posexport", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def workers(command: subprocess.Popen, count: int, wait: float = WALL) -> list[int]:
    """The command's processes once ``count`` of them run (the resource tracker, the fork server, its children)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and command.poll() is None:
        found = descendants(command.pid)
        if len(found) >= count:
            return found
        time.sleep(0.05)
    raise AssertionError(f"the command never started {count} processes: {command.communicate()[1].decode()[-2000:]}")


def ended(command: subprocess.Popen, seen: list[int]) -> tuple[int, str, str]:
    """The command's exit, stdout and stderr; fails if they stay open past WALL (whatever is left is killed)."""
    try:
        out, err = command.communicate(timeout=WALL)
    except subprocess.TimeoutExpired:
        for pid in alive([command.pid, *seen, *descendants(command.pid)]):
            os.kill(pid, signal.SIGKILL)
        command.communicate()
        raise AssertionError("the command or a process it started held the caller's pipes open") from None
    return command.returncode, out.decode(), err.decode()


def outlived(seen: list[int], within: float = 10) -> list[int]:
    """The processes of ``seen`` still running ``within`` seconds after the command ended (each then killed)."""
    deadline = time.monotonic() + within
    while alive(seen) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive(seen)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_killing_or_hanging_up_the_command_leaves_no_process_and_closes_the_pipes(models, tmp_path, sig):
    deep = tmp_path / ("t" * 100)  # the fork server's socket would pass AF_UNIX's limit under it
    deep.mkdir()
    command = posexport("model-parity", "--model", str(models["loop"]), "--against", str(models["loop"]), "--runtimes", "ort-cpu",
                        "--timeout", "300", env={"TMPDIR": str(deep)})
    seen = workers(command, 3)  # the resource tracker, the fork server, and a child running the Loop
    time.sleep(0.5)
    command.send_signal(sig)
    started = time.monotonic()
    code, out, err = ended(command, seen)
    assert time.monotonic() - started < 20 and code in (-sig, 128 + sig) and "Traceback" not in err, (code, err)
    left = outlived(seen)
    assert not left, f"{len(left)} of the command's processes outlived it"


def test_a_loop_of_2_62_iterations_is_a_failed_row_once_the_deadline_passes(models, tmp_path):
    # against itself: a model of other inputs is refused before any run (its feeds could not be the model's)
    code, out, err = cli("model-parity", "--model", str(models["loop"]), "--against", str(models["loop"]), "--runtimes", "ort-cpu",
                         "--timeout", "2", "--json", str(tmp_path / "r.json"))
    assert code == 1 and "Traceback" not in out + err, out + err
    (row,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert row["status"] == "error" and "ort-cpu timed out while running loop.onnx: ran past the --timeout of 2 s, and was killed" \
        in row["message"], row
    code, out, err = cli("bench", "--model", str(models["loop"]), "--against", str(models["loop"]), "--seqs", "4", "--decode-positions",
                         "4", "--warmup", "0", "--repeats", "3", "--timeout", "2", "--json", str(tmp_path / "b.json"))
    assert code == 0 and "Traceback" not in out + err, out + err
    prompt, decode = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert prompt["note"] == "onnxruntime timed out timing prompt 4: ran past the --timeout of 2 s, and was killed", prompt
    assert decode["note"].startswith("a decode step at position 4: the model has neither past key/values nor position_ids")


def stop_the_first_child(stopped: list[int]) -> None:
    """SIGSTOP the first runtime child model-parity forks (multiprocessing names it after its runtime)."""
    deadline = time.monotonic() + WALL
    while time.monotonic() < deadline:
        children = [p for p in multiprocessing.active_children() if p.name == "posexport ort-cpu" and p.pid]
        if children:
            os.kill(children[0].pid, signal.SIGSTOP)
            stopped.append(children[0].pid)
            return
        time.sleep(0.005)


def test_a_stopped_child_is_a_failed_row_once_the_deadline_passes(models, tmp_path):
    stopped: list[int] = []
    watcher = threading.Thread(target=stop_the_first_child, args=(stopped,), daemon=True)
    watcher.start()
    code, out, err = cli("model-parity", "--model", str(models["good"]), "--against", str(models["good"]), "--runtimes", "ort-cpu",
                         "--timeout", "3", "--json", str(tmp_path / "r.json"))
    watcher.join()
    assert stopped and code == 1 and "Traceback" not in out + err, out + err
    (row,) = json.loads((tmp_path / "r.json").read_text())["results"]
    assert "ran past the --timeout of 3 s (it was stopped), and was killed" in row["message"], row
    assert not alive(stopped)


def test_a_refusal_in_benchs_child_is_one_line_and_dim_sizes_it(tmp_path):
    graph = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "g", [oh.make_tensor_value_info("x", 1, ["n", 8])],
                          [oh.make_tensor_value_info("y", 1, ["n", 8])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    run = ["bench", "--model", str(tmp_path / "m.onnx"), "--against", str(tmp_path / "m.onnx"), "--seqs", "4", "--warmup", "0", "--repeats", "3"]
    code, out, err = cli(*run)
    assert code == 2 and "Traceback" not in out + err and err.strip() == "error: input 'x': cannot size its dimension 'n'; give it with --dim n=N", err
    code, out, err = cli(*run, "--dim", "n=4", "--json", str(tmp_path / "b.json"))
    assert code == 0 and "Traceback" not in out + err, out + err
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert rows[0]["call"] == "prompt 4" and rows[0]["ratio"] > 0
