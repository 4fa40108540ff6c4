"""Whole models run in a child process (posexport.runtimes.isolated): a runtime that dies loading or
running one is a failed row naming the runtime and the signal, and the command goes on (issue 18).

The crash is real: onnxruntime's GroupQueryAttention terminates the process (SIGABRT) on cos/sin caches
that the graph itself flattens to 1-D, which no check of stored tensors can see."""

from __future__ import annotations

import json
import math
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

from posexport.runtimes import get_runtime
from posexport.runtimes.isolated import IsolatedModelSession, RuntimeCrash

from .test_parity_cli import cli

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD, ROWS = 32, 32, 2, 1, 16, 64


def gqa_decoder(flat_caches: bool) -> onnx.ModelProto:
    """input_ids → embedding → GroupQueryAttention (rotary from cos/sin caches, a past cache) → logits; the
    caches go through Identity, or through a Reshape to 1-D that onnxruntime dies on."""
    rng = np.random.default_rng(0)
    angles = np.outer(np.arange(ROWS), 10000.0 ** (-np.arange(0, HEAD, 2) / HEAD))
    tensors = {"embed": rng.standard_normal((VOCAB, HIDDEN)), "wq": rng.standard_normal((HIDDEN, HEADS * HEAD)) / 6,
               "wk": rng.standard_normal((HIDDEN, KV_HEADS * HEAD)) / 6, "wv": rng.standard_normal((HIDDEN, KV_HEADS * HEAD)) / 6,
               "wo": rng.standard_normal((HEADS * HEAD, VOCAB)) / 6, "cos_table": np.cos(angles), "sin_table": np.sin(angles)}
    inits = [onh.from_array(v.astype(np.float32), k) for k, v in tensors.items()]
    inits += [onh.from_array(np.array(v, np.int64), k) for k, v in (("flat", [-1]), ("one", 1), ("axis", [1]))]
    caches = [oh.make_node("Reshape", [f"{c}_table", "flat"], [c]) if flat_caches else oh.make_node("Identity", [f"{c}_table"], [c])
              for c in ("cos", "sin")]
    nodes = [
        oh.make_node("Gather", ["embed", "input_ids"], ["x"]),
        *(oh.make_node("MatMul", ["x", f"w{p}"], [p]) for p in "qkv"),
        oh.make_node("ReduceSum", ["attention_mask", "axis"], ["kept"], keepdims=0),
        oh.make_node("Sub", ["kept", "one"], ["last"]), oh.make_node("Cast", ["last"], ["seqlens_k"], to=onnx.TensorProto.INT32),
        oh.make_node("Shape", ["attention_mask"], ["mask_shape"]), oh.make_node("Gather", ["mask_shape", "one"], ["total64"]),
        oh.make_node("Cast", ["total64"], ["total"], to=onnx.TensorProto.INT32), *caches,
        oh.make_node("GroupQueryAttention", ["q", "k", "v", "past_key_values.0.key", "past_key_values.0.value", "seqlens_k", "total",
                                             "cos", "sin"], ["attn", "present.0.key", "present.0.value"], domain="com.microsoft",
                     num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=1),
        oh.make_node("MatMul", ["attn", "wo"], ["logits"]),
    ]
    f32, past, present = onnx.TensorProto.FLOAT, ["batch_size", KV_HEADS, "past_sequence_length", HEAD], ["batch_size", KV_HEADS, "total_sequence_length", HEAD]
    graph = oh.make_graph(nodes, "gqa", [
        oh.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["batch_size", "sequence_length"]),
        oh.make_tensor_value_info("attention_mask", onnx.TensorProto.INT64, ["batch_size", "total_sequence_length"]),
        oh.make_tensor_value_info("past_key_values.0.key", f32, past), oh.make_tensor_value_info("past_key_values.0.value", f32, past),
    ], [oh.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", VOCAB]),
        oh.make_tensor_value_info("present.0.key", f32, present), oh.make_tensor_value_info("present.0.value", f32, present)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])


@pytest.fixture(scope="module")
def decoders(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("gqa")
    for name, flat in (("good.onnx", False), ("flat.onnx", True)):
        onnx.save(gqa_decoder(flat), str(folder / name))
    return folder / "good.onnx", folder / "flat.onnx"


def test_onnxruntime_aborting_on_a_model_is_a_failed_row_and_the_other_runtimes_still_run(decoders, tmp_path):
    good, flat = decoders
    code, out, err = cli("model-parity", "--model", str(flat), "--against", str(good), "--past", "8",
                         "--runtimes", "ort-cpu,ort-cpu-noopt,openvino", "--json", str(tmp_path / "r.json"))
    assert code == 1 and "Traceback" not in out + err, out + err
    report = json.loads((tmp_path / "r.json").read_text())
    for runtime in ("ort-cpu", "ort-cpu-noopt"):  # the second still runs after the first one's child died
        rows = [r for r in report["results"] if r["runtime"] == runtime]
        assert len(rows) == 2 and all(r["status"] == "error" for r in rows), rows
        assert all(f"{runtime} crashed while running flat.onnx: killed by SIGABRT" in r["message"] for r in rows), rows
    assert "openvino" in report["runtimes"] or "openvino" in report["unavailable"]
    assert "crashed while running flat.onnx: killed by SIGABRT" in out  # the row on the terminal, on one line
    # The same model with its caches kept 2-D runs, and agrees with itself on every runtime that runs it.
    code, out, err = cli("model-parity", "--model", str(good), "--against", str(good), "--past", "8", "--runtimes", "ort-cpu,ort-cpu-noopt")
    assert code == 0, out + err


def wire_model() -> onnx.ModelProto:
    """x [batch, seq, 8] float32 → y = x·W (float32), its float16 cast, y > 0 (bool), x's shape (int64), an
    empty slice: every kind of output that crosses the child's pipe."""
    w = onh.from_array(np.random.default_rng(1).standard_normal((8, 5)).astype(np.float32), "w")
    nodes = [oh.make_node("MatMul", ["x", "w"], ["y"]), oh.make_node("Cast", ["y"], ["half"], to=onnx.TensorProto.FLOAT16),
             oh.make_node("Greater", ["y", "zero"], ["positive"]), oh.make_node("Shape", ["x"], ["shape"]),
             oh.make_node("Slice", ["y", "zero_i", "zero_i", "axis"], ["empty"])]
    consts = [onh.from_array(np.array(0, np.float32), "zero"), onh.from_array(np.array([0], np.int64), "zero_i"),
              onh.from_array(np.array([1], np.int64), "axis")]
    outputs = [oh.make_tensor_value_info(n, t, None) for n, t in (("y", 1), ("half", 10), ("positive", 9), ("shape", 7), ("empty", 1))]
    graph = oh.make_graph(nodes, "wire", [oh.make_tensor_value_info("x", 1, ["batch", "seq", 8])], outputs, [w, *consts])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def test_outputs_cross_from_the_child_intact_and_a_killed_child_is_a_crash_then_replaced(tmp_path):
    model = wire_model()
    onnx.save(model, str(tmp_path / "wire.onnx"))
    weights = onh.to_array(model.graph.initializer[0]).astype(np.float64)
    session = IsolatedModelSession(get_runtime("ort-cpu"), tmp_path / "wire.onnx")
    x = np.random.default_rng(2).standard_normal((2, 300, 8)).astype(np.float32)
    ref = x.astype(np.float64) @ weights

    def check(out: dict[str, np.ndarray]) -> None:
        assert np.abs(out["y"] - ref).max() / max(1.0, np.abs(ref).max()) <= 1e-5
        assert out["half"].dtype == np.float16 and np.abs(out["half"] - ref).max() / max(1.0, np.abs(ref).max()) <= 2e-3
        assert out["positive"].dtype == np.bool_ and np.array_equal(out["positive"], out["y"] > 0)
        assert out["shape"].dtype == np.int64 and out["shape"].tolist() == [2, 300, 8]
        assert out["empty"].shape == (2, 0, 5)

    check(session.run({"x": x}))
    os.kill(session.child.process.pid, signal.SIGSEGV)
    with pytest.raises(RuntimeCrash, match=r"^ort-cpu crashed while running wire.onnx: killed by SIGSEGV"):
        session.run({"x": x})
    check(session.run({"x": x}))  # a fresh child


def test_a_script_without_a_main_guard_runs_whole_models(decoders, tmp_path):
    """multiprocessing would run the caller's script again in the child: posexport's children never do."""
    good, _ = decoders
    script = tmp_path / "script.py"
    script.write_text(f"import posexport\nprint(posexport.model_parity({str(good)!r}, {str(good)!r}, runtimes=['ort-cpu']).passed)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stdout + done.stderr


def test_a_child_killed_while_loading_is_a_crash_naming_the_load(tmp_path):
    """onnxruntime opening a FIFO (which model-parity refuses before any runtime sees it) waits for a writer
    that never comes: the child is killed by a signal while loading, and the parent says so instead of waiting."""
    os.mkfifo(tmp_path / "m.onnx")

    def kill_the_loader() -> None:
        while not (loading := [p for p in multiprocessing.active_children() if p.name == "posexport ort-cpu" and p.pid]):
            time.sleep(0.05)
        time.sleep(0.5)
        os.kill(loading[0].pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_the_loader, daemon=True)
    killer.start()
    with pytest.raises(RuntimeCrash, match=r"^ort-cpu crashed while loading m.onnx: killed by SIGKILL$"):
        IsolatedModelSession(get_runtime("ort-cpu"), tmp_path / "m.onnx")
    killer.join(5)


def test_bench_model_times_each_call_in_a_child_and_a_crash_is_the_rows_note(decoders, tmp_path):
    good, flat = decoders
    code, out, err = cli("bench", "--model", str(flat), "--against", str(good), "--seqs", "16", "--decode-positions", "8",
                         "--warmup", "1", "--repeats", "3", "--json", str(tmp_path / "b.json"))
    assert code == 0 and "Traceback" not in out + err, out + err
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert [r["call"] for r in rows] == ["prompt 16", "decode at position 8"]
    for r in rows:
        assert r["note"].startswith(f"onnxruntime crashed timing {r['call']}: killed by SIGABRT") and r["ratio"] is None
