"""Graph edits every rewrite shares: posexport's cos/sin function called once (its functions and tables
named per site, so two ropes never clash), new nodes put where the old ones were, and the old nodes
removed once nothing reads them. Nothing else in the model is touched."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from ..contract import DOMAIN, DOMAIN_VERSION
from ..onnxgraph.graph import Graph
from ..rope import sources
from ..rope.encoding import RopeParams
from ..script import callees_first, called_functions, newest_opset, standard_opset


def renamed(protos: list[onnx.FunctionProto], tag: str) -> list[onnx.FunctionProto]:
    """Function protos with ``_tag`` appended to every posexport function name (and to the calls)."""
    if not tag:
        return protos
    names = {p.name for p in protos if p.domain == DOMAIN}
    out = []
    for proto in protos:
        copy = onnx.FunctionProto()
        copy.CopyFrom(proto)
        if copy.domain == DOMAIN:
            copy.name = f"{copy.name}_{tag}"
        for node in copy.node:
            if node.domain == DOMAIN and node.op_type in names:
                node.op_type = f"{node.op_type}_{tag}"
        out.append(copy)
    return out


def add_functions(model: onnx.ModelProto, protos: list[onnx.FunctionProto]) -> None:
    have = {(f.domain, f.name) for f in model.functions}
    for proto in protos:
        if (proto.domain, proto.name) not in have:
            model.functions.append(proto)
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(oh.make_opsetid(DOMAIN, DOMAIN_VERSION))


def free_tag(model: onnx.ModelProto, names: list[str]) -> str:
    """'' when none of these posexport functions exist in the model yet, else the first free suffix."""
    have = {f.name for f in model.functions if f.domain == DOMAIN}
    index = 0
    while any((f"{n}_{index}" if index else n) in have for n in names):
        index += 1
    return str(index) if index else ""


def add_cos_sin_call(graph: Graph, positions: str, p: RopeParams, squeeze: bool = False) -> tuple[str, str, list[onnx.NodeProto]]:
    """(cos, sin, new nodes): posexport's cos/sin [..., rotary_dim/2] of ``positions`` (without their last
    axis when ``squeeze``) for rope ``p``; its functions and tables are added under names no other rope
    of the model uses (a suffix _1, _2 … from the second one on)."""
    op = standard_opset(min(graph.opset(), newest_opset()))
    source = sources.source_of(p)
    entry = source.function(p, op)
    protos = callees_first([entry.to_function_proto()] + [f.to_function_proto() for f in called_functions([entry])])
    tag = free_tag(graph.model, [f.name for f in protos])
    protos = renamed(protos, tag)
    add_functions(graph.model, protos)
    prefix = f"posexport.rope{'_' + tag if tag else ''}"
    tables = source.arrays(p)
    graph.model.graph.initializer.extend(onh.from_array(array, f"{prefix}.{name}") for name, array in tables.items())
    name = f"{entry.name}_{tag}" if tag else entry.name
    cos, sin = f"{prefix}.cos", f"{prefix}.sin"
    new = []
    if squeeze:
        graph.model.graph.initializer.append(onh.from_array(np.array([-1], dtype=np.int64), f"{prefix}.last_axis"))
        new.append(oh.make_node("Squeeze", [positions, f"{prefix}.last_axis"], [f"{prefix}.positions"], name=f"{prefix}/squeeze"))
        positions = new[-1].output[0]
    # The tables are indexed with int64 positions whatever integer type the model carries.
    new.append(oh.make_node("Cast", [positions], [f"{prefix}.position_ids"], to=onnx.TensorProto.INT64, name=f"{prefix}/cast"))
    new.append(oh.make_node(name, [new[-1].output[0]] + [f"{prefix}.{n}" for n in tables], [cos, sin], domain=DOMAIN, name=prefix))
    return cos, sin, new


def splice_nodes(graph: Graph, old: list[str], new: list[onnx.NodeProto]) -> None:
    """Insert ``new`` where the first of the ``old`` nodes stands (they all follow the positions they read)."""
    nodes = graph.model.graph.node
    named = set(old) - {""}
    first = min(i for i, n in enumerate(nodes) if n.name in named)
    produced = {o for n in new for o in n.output}
    # The old producers of the names the new nodes now produce go first.
    keep = [n for n in nodes if not produced & set(n.output)]
    at = sum(1 for n in nodes[:first] if not produced & set(n.output))
    del nodes[:]
    nodes.extend(keep[:at] + new + keep[at:])


def remove_dead(model: onnx.ModelProto, candidates: set[str], initializers: set[str]) -> None:
    """Remove candidate nodes whose outputs nobody reads (repeatedly), then the listed initializers
    nobody reads any more."""
    graph = model.graph
    candidates = candidates - {""}
    outputs = {o.name for o in graph.output}
    while True:
        read = {i for n in graph.node for i in n.input} | outputs
        dead = [n for n in graph.node if n.name in candidates and not any(o in read for o in n.output if o)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    read = {i for n in graph.node for i in n.input} | outputs
    for tensor in [t for t in graph.initializer if t.name in initializers and t.name not in read]:
        graph.initializer.remove(tensor)


def upstream(graph: Graph, names: list[str]) -> set[str]:
    """These nodes and every node they are computed from (candidates for remove_dead)."""
    by_name = {n.name: n for n in graph.model.graph.node if n.name}
    found, todo = set(), [by_name[n] for n in names if n in by_name]
    while todo:
        node = todo.pop()
        if node.name in found:
            continue
        found.add(node.name)
        todo += [graph.producer[i] for i in node.input if i in graph.producer]
    return found
