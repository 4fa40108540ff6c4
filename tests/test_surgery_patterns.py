"""The pattern helper the site kinds share: a pattern that matches gives what it found, one that does not says why
(a Miss, false in a test, naming the node it found instead); each per-call kind's pattern on the graph it reads and
on the others', and a fused op's gathered caches. The graphs are built here, node by node."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from posexport.onnxgraph.graph import Graph
from posexport.surgery.caches import gathered_from
from posexport.surgery.pattern import Miss, through, up
from posexport.surgery.rope_interleaved import InterleavedKind
from posexport.surgery.rope_inv_freq import InvFreqKind
from posexport.surgery.rope_matmul import MatMulKind

INV_FREQ = 1.0 / 10000.0 ** (np.arange(0, 8, 2) / 8)


def graph_of(nodes: list[onnx.NodeProto], initializers: dict[str, np.ndarray]) -> Graph:
    inputs = [oh.make_tensor_value_info("position_ids", onnx.TensorProto.INT64, ["b", "s"])]
    outputs = [oh.make_tensor_value_info(nodes[-1].output[0], onnx.TensorProto.FLOAT, None)]
    g = oh.make_graph(nodes, "g", inputs, outputs, [onh.from_array(v, k) for k, v in initializers.items()])
    return Graph(oh.make_model(g, opset_imports=[oh.make_opsetid("", 18)]))


def mul_form() -> Graph:
    """position_ids ─Unsqueeze(-1)─Cast─Mul(inv_freq)─Cos / Sin: the per-call Mul form."""
    return graph_of([oh.make_node("Unsqueeze", ["position_ids", "axes"], ["p"], name="unsqueeze"),
                     oh.make_node("Cast", ["p"], ["pf"], to=onnx.TensorProto.FLOAT, name="cast"),
                     oh.make_node("Mul", ["pf", "inv_freq"], ["angles"], name="mul"),
                     oh.make_node("Sin", ["angles"], ["sin"], name="sin"), oh.make_node("Cos", ["angles"], ["cos"], name="cos")],
                    {"axes": np.array([-1], np.int64), "inv_freq": INV_FREQ.astype(np.float32)})


def added_form() -> Graph:
    """Angles made by Add, a form no per-call kind reads."""
    return graph_of([oh.make_node("Cast", ["position_ids"], ["pf"], to=onnx.TensorProto.FLOAT, name="cast"),
                     oh.make_node("Add", ["pf", "shift"], ["angles"], name="add"),
                     oh.make_node("Cos", ["angles"], ["cos"], name="cos")], {"shift": np.ones(1, np.float32)})


def test_the_mul_pattern_matches_its_form_and_the_other_kinds_say_what_they_found_instead():
    graph = mul_form()
    found = InvFreqKind().trace(graph, "angles")
    assert found and np.allclose(found["inv_freq"], INV_FREQ) and found["positions"] == "position_ids"
    assert found["nodes"] == ["unsqueeze", "cast", "mul"] and found["full_width"] is False
    for kind, why in ((MatMulKind(), "angles is made by Mul node 'mul', not by Transpose"),
                      (InterleavedKind(), "angles is made by Mul node 'mul', not by Reshape")):
        missed = kind.trace(graph, "angles")
        assert not missed and isinstance(missed, Miss) and missed.why == why
    assert [s.kind for s in [InvFreqKind().match(graph)][0]] == ["rope-inv-freq"]


def test_a_form_no_kind_reads_is_a_miss_naming_its_node():
    graph = added_form()
    missed = InvFreqKind().trace(graph, "angles")
    assert not missed and missed.why == "the angles are made by Add node 'add', not by Mul"
    assert InvFreqKind().match(graph) == []


def test_up_and_through_name_what_they_pass_and_what_they_find():
    graph = mul_form()
    assert up(graph, "angles", "Mul").name == "mul"
    assert up(graph, "position_ids", "Mul") == Miss("position_ids is a graph input or a stored tensor, not made by Mul")
    assert through(graph, "pf", ("Cast", "Unsqueeze")) == ("position_ids", None)
    tensor, node = through(graph, "angles", ("Cast",))
    assert tensor == "angles" and node.name == "mul"


def test_a_cache_gathered_along_another_axis_is_a_miss():
    table = np.ones((16, 4), np.float32)
    rows = graph_of([oh.make_node("Gather", ["table", "position_ids"], ["cos"], axis=0, name="rows")], {"table": table})
    assert gathered_from(rows, "cos").name == "rows"
    columns = graph_of([oh.make_node("Gather", ["table", "position_ids"], ["cos"], axis=1, name="columns")], {"table": table})
    missed = gathered_from(columns, "cos")
    assert not missed and "gathers along axis 1" in missed.why
