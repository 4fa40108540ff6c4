"""Parity catches the faults that break deployments, on graphs built wrong on purpose, and says where:
which runtime, which lengths, how far off. The same graph shape with correct float64 tables passes."""

from __future__ import annotations

import copy
import functools
import hashlib

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from posexport import export, verdicts
from posexport.reports import parity as reports
from posexport.rope.encoding import inv_freq_and_factor
from posexport.runtimes import RUNTIMES
from posexport.runtimes.openvino import OpenVino

FLOAT = onnx.TensorProto.FLOAT
INT64 = onnx.TensorProto.INT64
# Small heads, a short trained length and a graph limit of 8192 keep every sweep cheap.
PARAMS = dict(head_dim=32, heads=2, max_positions=512, position_limit=8192)
SEQS = (1, 17, 512, 4096)


def contract_graph(p, nodes: list, initializers: list, extra_opsets: tuple = ()) -> onnx.ModelProto:
    """A graph with the rope contract (x [batch, seq, heads, head_dim], position_ids -> y) around nodes."""
    dims = ["batch", "seq", p.heads, p.head_dim]
    graph = oh.make_graph(
        nodes, "fault",
        [oh.make_tensor_value_info("x", FLOAT, dims), oh.make_tensor_value_info("position_ids", INT64, ["batch", "seq"])],
        [oh.make_tensor_value_info("y", FLOAT, dims)],
        initializer=initializers,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18), *extra_opsets], ir_version=10)


def rotation_nodes(p) -> tuple[list, list]:
    """Nodes (and their constants) rotating x by cos/sin [batch, seq, d/2] in the half layout."""
    n = p.head_dim // 2
    nodes = [
        oh.make_node("Unsqueeze", ["cos", "heads_axis"], ["c"]),
        oh.make_node("Unsqueeze", ["sin", "heads_axis"], ["s"]),
        oh.make_node("Split", ["x", "halves"], ["a", "b"], axis=-1),
        oh.make_node("Mul", ["a", "c"], ["ac"]), oh.make_node("Mul", ["b", "s"], ["bs"]),
        oh.make_node("Mul", ["b", "c"], ["bc"]), oh.make_node("Mul", ["a", "s"], ["as"]),
        oh.make_node("Sub", ["ac", "bs"], ["ya"]), oh.make_node("Add", ["bc", "as"], ["yb"]),
        oh.make_node("Concat", ["ya", "yb"], ["y"], axis=-1),
    ]
    return nodes, [onh.from_array(np.array([2], np.int64), "heads_axis"), onh.from_array(np.array([n, n], np.int64), "halves")]


def single_table_graph(p, cos: np.ndarray, sin: np.ndarray) -> onnx.ModelProto:
    """The usual hand export: one cos/sin table [rows, d/2] gathered by position_ids, half-layout rotation."""
    rotate, constants = rotation_nodes(p)
    nodes = [oh.make_node("Gather", ["cos_table", "position_ids"], ["cos"]), oh.make_node("Gather", ["sin_table", "position_ids"], ["sin"])]
    tables = [onh.from_array(cos.astype(np.float32), "cos_table"), onh.from_array(sin.astype(np.float32), "sin_table")]
    return contract_graph(p, nodes + rotate, tables + constants)


def float64_angles_in_graph(p) -> onnx.ModelProto:
    """Angles formed at run time in float64 (as the numerics allow, docs/numerics.md), then cos/sin cast to float32."""
    rotate, constants = rotation_nodes(p)
    inv_freq, _ = inv_freq_and_factor(p)
    nodes = [
        oh.make_node("Cast", ["position_ids"], ["p64"], to=onnx.TensorProto.DOUBLE),
        oh.make_node("Unsqueeze", ["p64", "last_axis"], ["p64_col"]),
        oh.make_node("Mul", ["p64_col", "inv_freq"], ["angles"]),
        oh.make_node("Cos", ["angles"], ["cos64"]), oh.make_node("Sin", ["angles"], ["sin64"]),
        oh.make_node("Cast", ["cos64"], ["cos"], to=FLOAT), oh.make_node("Cast", ["sin64"], ["sin"], to=FLOAT),
    ]
    inits = [onh.from_array(inv_freq.astype(np.float64), "inv_freq"), onh.from_array(np.array([-1], np.int64), "last_axis")]
    return contract_graph(p, nodes + rotate, inits + constants)


def contrib_graph(p) -> onnx.ModelProto:
    """onnxruntime's com.microsoft.RotaryEmbedding on x as [batch, seq, heads·head_dim], partial rotary."""
    inv_freq, _ = inv_freq_and_factor(p)
    angles = np.arange(p.position_limit)[:, None] * inv_freq[None, :]
    nodes = [
        oh.make_node("Reshape", ["x", "packed"], ["x3"]),
        oh.make_node("RotaryEmbedding", ["x3", "position_ids", "cos_cache", "sin_cache"], ["y3"], domain="com.microsoft",
                     interleaved=0, num_heads=p.heads, rotary_embedding_dim=p.rotary_dim),
        oh.make_node("Reshape", ["y3", "unpacked"], ["y"]),
    ]
    inits = [onh.from_array(np.cos(angles).astype(np.float32), "cos_cache"), onh.from_array(np.sin(angles).astype(np.float32), "sin_cache"),
             onh.from_array(np.array([0, 0, p.heads * p.head_dim], np.int64), "packed"),
             onh.from_array(np.array([0, 0, p.heads, p.head_dim], np.int64), "unpacked")]
    return contract_graph(p, nodes, inits, (oh.make_opsetid("com.microsoft", 1),))


def as_artifact(model: onnx.ModelProto, **params) -> export.Artifact:
    """The hand-built graph under a manifest of the rope encoding with these parameters."""
    real = export.build("rope", params)
    onnx.checker.check_model(model)
    manifest = copy.deepcopy(real.manifest) | {"source": "hand-built", "backend": "hand-built"}
    return export.Artifact(model, manifest, real.encoding, real.params, real.options)


def float64_tables(p, rows: int) -> tuple[np.ndarray, np.ndarray]:
    inv_freq, _ = inv_freq_and_factor(p)
    angles = np.arange(rows)[:, None] * inv_freq[None, :]
    return np.cos(angles), np.sin(angles)


@functools.lru_cache(maxsize=None)
def frozen_table_graph() -> export.Artifact:
    """cos/sin cached for the export's 512 positions only: right inside, wrong (or an error) past it."""
    p = export.build("rope", PARAMS).params
    return as_artifact(single_table_graph(p, *float64_tables(p, p.max_positions)), **PARAMS)


@functools.lru_cache(maxsize=None)
def float16_angles_graph() -> export.Artifact:
    """Angles formed in float16 (positions and frequencies rounded, product rounded), then cos/sin."""
    p = export.build("rope", PARAMS).params
    inv_freq, _ = inv_freq_and_factor(p)
    angles = np.arange(p.position_limit).astype(np.float16)[:, None] * inv_freq.astype(np.float16)[None, :]
    return as_artifact(single_table_graph(p, np.cos(angles.astype(np.float64)), np.sin(angles.astype(np.float64))), **PARAMS)


@functools.lru_cache(maxsize=None)
def correct_single_table_graph() -> export.Artifact:
    p = export.build("rope", PARAMS).params
    return as_artifact(single_table_graph(p, *float64_tables(p, p.position_limit)), **PARAMS)


@functools.lru_cache(maxsize=None)
def float64_angles_graph() -> export.Artifact:
    return as_artifact(float64_angles_in_graph(export.build("rope", PARAMS).params), **PARAMS)


CONTRIB = PARAMS | dict(rotary_dim=16)


@functools.lru_cache(maxsize=None)
def partial_contrib_graph() -> export.Artifact:
    return as_artifact(contrib_graph(export.build("rope", CONTRIB).params), **CONTRIB)


@functools.lru_cache(maxsize=None)
def run(which: str, runtimes: tuple) -> verdicts.Report:
    art = {"frozen": frozen_table_graph, "fp16": float16_angles_graph, "control": correct_single_table_graph,
           "contrib": partial_contrib_graph, "fp64": float64_angles_graph}[which]()
    return verdicts.run_parity(art, list(runtimes), seqs=SEQS, batches=(1, 3), properties=which != "contrib")


GRAPH_RUNTIMES = ("reference", "ort-cpu", "openvino")


def failing(report: verdicts.Report, runtime: str) -> dict[str, verdicts.CaseResult]:
    return {r.case: r for r in report.results if r.runtime == runtime and r.status != "pass"}


def test_the_single_table_graph_with_float64_tables_passes_every_case_but_wraps_negative_positions():
    report = run("control", GRAPH_RUNTIMES)
    assert all(r.status == "pass" for r in report.results), reports.verdict_line(report)
    assert {r.runtime for r in report.results} == set(GRAPH_RUNTIMES)
    held = {(p.property, p.runtime) for p in report.properties if p.status == "pass"}
    assert {(prop, rt) for prop in ("relative-position", "norm-preserved") for rt in GRAPH_RUNTIMES} <= held
    # ONNX Gather counts a negative index from the end: position −1 silently reads the last row. The
    # posexport graphs route negative positions past the table; a plain hand export does not.
    wrapped = {p.runtime: p for p in report.properties if p.property == "raises-past-limit"}
    assert wrapped["ort-cpu"].status == "fail" and "position -1 returned" in wrapped["ort-cpu"].detail
    assert wrapped["openvino"].status == "limitation"
    assert not report.passed


def test_table_frozen_to_the_export_length_fails_past_it():
    report = run("frozen", GRAPH_RUNTIMES)
    assert not report.passed
    for runtime in GRAPH_RUNTIMES:
        bad = failing(report, runtime)
        # Every failing case reaches past the 512 cached positions; every case inside them passes.
        assert bad and all(r.largest_position >= 512 for r in bad.values()), runtime
        assert all(r.status == "pass" for r in report.results if r.runtime == runtime and r.largest_position < 512)
        assert {"seq4096-b1", "past-trained@513", "decode@3000"} <= set(bad)
    # onnxruntime and the reference evaluator raise on the out-of-range Gather; OpenVINO returns zero
    # rows and is caught by the comparison, with the size of the error.
    assert failing(report, "ort-cpu")["decode@3000"].status == "error"
    assert "out of" in failing(report, "ort-cpu")["decode@3000"].message.lower() or "bounds" in failing(report, "ort-cpu")["decode@3000"].message
    ov = failing(report, "openvino")["decode@3000"]
    assert ov.status == "fail" and ov.comparison.normalised > 0.1
    text = reports.to_markdown(report)
    assert "decode@3000" in text and "openvino" in text and "positions ≤ 3000" in text


def test_angles_formed_in_float16_fail_with_the_error_growing_with_position():
    report = run("fp16", GRAPH_RUNTIMES)
    assert not report.passed
    for runtime in GRAPH_RUNTIMES:
        results = {r.case: r for r in report.results if r.runtime == runtime}
        assert results["seq1-b1"].status == "pass"  # position 0: exact even in float16
        assert results["decode@8191"].status == "fail" and results["decode@8191"].comparison.normalised > 0.1
        assert results["seq4096-b1"].status == "fail"
    summary = {s.runtime: s for s in reports.summarise(report)}
    assert summary["ort-cpu"].worst_error > 0.1 and summary["ort-cpu"].passed < summary["ort-cpu"].total
    # The relative-position property breaks too: float16 angles are not a rotation group any more.
    assert any(p.property == "relative-position" and p.status == "fail" for p in report.properties)


def test_float64_angles_fail_on_openvino_which_computes_them_in_float32():
    """Forming angles in float64 inside the graph is exact on onnxruntime; OpenVINO's CPU plugin runs
    float64 arithmetic in float32, so large positions come out wrong, and the report says why."""
    report = run("fp64", GRAPH_RUNTIMES)
    assert all(r.status == "pass" for r in report.results if r.runtime in ("ort-cpu", "reference"))
    bad = failing(report, "openvino")
    # The float32 product p·θ loses more the larger p: short sequences from 0 pass, far positions fail.
    assert {"decode@3000", "decode@8191", "seq4096-b1"} <= set(bad) and not {"seq1-b1", "seq17-b1"} & set(bad)
    assert all(r.largest_position > 500 for r in bad.values())
    assert 1e-5 < max(r.comparison.normalised for r in bad.values()) < 1e-2
    assert "float64" in report.notes["openvino"] and "float32" in report.notes["openvino"]
    assert "openvino" in reports.to_markdown(report).split("## Notes")[1]


def test_openvino_refuses_the_partial_rotary_contrib_op_by_default():
    ok, why = RUNTIMES["openvino"].supports(partial_contrib_graph())
    assert not ok and "rotary_embedding_dim=16" in why and "OpenVINO ignores" in why
    report = run("contrib", ("ort-cpu", "openvino", "reference"))
    assert "openvino" in report.unavailable and "reference" in report.unavailable
    assert report.passed and not report.strictly_passed()  # onnxruntime honours rotary_embedding_dim


def test_partial_rotary_contrib_op_forced_onto_openvino_fails_and_names_it():
    report = verdicts.run_parity(partial_contrib_graph(), ["ort-cpu", OpenVino(run_partial_contrib_rotary=True)],
                               seqs=(1, 17), batches=(1, 3), properties=False)
    assert not report.passed
    assert all(r.status == "pass" for r in report.results if r.runtime == "ort-cpu")
    bad = failing(report, "openvino")
    assert set(bad) == {r.case for r in report.results if r.runtime == "openvino" and r.largest_position > 0}
    worst = max(r.comparison.normalised for r in bad.values())
    assert worst > 0.5
    summary = {s.runtime: s for s in reports.summarise(report)}["openvino"]
    assert summary.worst_error == worst and summary.failing
    junit = reports.to_junit(report)
    assert 'classname="parity.rope-float32.openvino"' in junit and "<failure" in junit


@pytest.mark.parametrize("strict", [False, True])
def test_cli_points_at_the_cause(tmp_path, strict):
    """A hand-built faulty graph saved with a manifest: the CLI's exit code and report name the fault."""
    from .test_parity_cli import cli

    art = frozen_table_graph()
    # A loadable pair: the manifest carries this graph's sha256 and a source and backend a build can have.
    manifest = art.manifest | {"source": "script", "backend": "portable", "sha256": hashlib.sha256(art.model_bytes).hexdigest()}
    onnx_path, _ = export.write_graph(art.model_bytes, manifest, tmp_path, "frozen")
    code, out, err = cli("parity", str(onnx_path), "--runtimes", "ort-cpu", "--seqs", "17", "--batches", "1",
                         "--no-properties", *(["--strict"] if strict else []))
    assert code == 1
    assert "past-trained@513" in out and "ort-cpu" in out and "FAIL" in out
