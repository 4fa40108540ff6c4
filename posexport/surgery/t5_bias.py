"""T5's relative attention bias: a trained [buckets, heads] table gathered by log-spaced distance buckets
that the exported graph recomputes on every call (Sub of two position ranges, then Abs/Log/Div/Min/Where
over q_len·k_len distances), then Transpose(2, 0, 1) and Unsqueeze(0) into [1, heads, q_len, k_len].

The rewrite puts posexport's t5 lookup (``posexport.T5PositionBias``: the table's rows for every relative
position in [−max_distance, max_distance], read at clamp(k − q)) in place of that chain, from the same two
position ranges. The check runs the graph's own bucket computation (onnxruntime, on the graph's nodes from
the relative positions to the bucket indices) over every distance up to 2·max_distance + 16 and requires
posexport's buckets to equal it there: beyond max_distance both stay in the last bucket, so the bias is
the same table row, bit for bit, at every length."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from ..contract import DOMAIN
from ..encodings.t5 import T5Params, bias_by_rp_of, relative_bucket, t5_position_function
from ..errors import PosexportError, one_line
from ..onnxgraph.graph import Graph, attribute, node_label
from ..script import newest_opset, standard_opset
from .pattern import ancestors, readers, table_gathers
from .rebuilds import BIAS
from .replace import add_functions, free_tag, remove_dead, renamed, splice_nodes
from .sites import Fault, Site, SiteKind


def unsqueezed(graph: Graph, name: str) -> tuple[str, list[int]] | None:
    """(input, axes) of the Unsqueeze producing ``name``."""
    node = graph.producer.get(name)
    if node is None or node.op_type != "Unsqueeze":
        return None
    axes = graph.array(node.input[1]) if len(node.input) > 1 else attribute(node, "axes")
    return (node.input[0], [int(a) for a in np.asarray(axes).reshape(-1)]) if axes is not None else None


def relative_positions(chain: list[onnx.NodeProto], graph: Graph) -> tuple[onnx.NodeProto, str, str] | None:
    """(Sub node, q positions, k positions) of rp = Unsqueeze(k, 0) − Unsqueeze(q, 1) in the chain."""
    for node in chain:
        if node.op_type == "Sub":
            keys, queries = unsqueezed(graph, node.input[0]), unsqueezed(graph, node.input[1])
            if keys and queries and keys[1] == [0] and queries[1] == [1]:
                return node, queries[0], keys[0]
    return None


def max_distance(chain: list[onnx.NodeProto], graph: Graph) -> int | None:
    """max_distance from ⌊ln(n / max_exact) / ln(max_distance / max_exact) · …⌋: the divisor before the
    Log is max_exact and the one after it ln(max_distance / max_exact)."""
    for node in chain:
        if node.op_type != "Log":
            continue
        before = graph.producer.get(node.input[0])
        after = [c for c in graph.consumers.get(node.output[0], []) if c.op_type == "Div"]
        if before is None or before.op_type != "Div" or len(after) != 1:
            return None
        exact, log_ratio = graph.array(before.input[1]), graph.array(after[0].input[1])
        if exact is None or log_ratio is None or exact.size != 1 or log_ratio.size != 1:
            return None
        return round(float(exact.reshape(())) * math.exp(float(log_ratio.reshape(()))))
    return None


def bias_tail(graph: Graph, gather: onnx.NodeProto) -> list[onnx.NodeProto] | None:
    """[Transpose(2, 0, 1), Unsqueeze(0)] after the Gather: how the bias [1, heads, q, k] is formed."""
    transposes = graph.consumers.get(gather.output[0], [])
    if len(transposes) != 1 or transposes[0].op_type != "Transpose" or list(attribute(transposes[0], "perm", [])) != [2, 0, 1]:
        return None
    after = graph.consumers.get(transposes[0].output[0], [])
    if len(after) != 1 or (unsqueezed(graph, after[0].output[0]) or (None, None))[1] != [0]:
        return None
    return [transposes[0], after[0]]


def between(graph: Graph, source: str, target: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """(nodes in graph order, initializers) computing ``target`` from ``source`` and constants alone."""
    nodes, tables, todo, seen = set(), [], [target], set()
    while todo:
        name = todo.pop()
        if name == source or name in seen:
            continue
        seen.add(name)
        if name in graph.initializers:
            tables.append(graph.initializers[name])
        elif name in graph.producer:
            nodes.add(id(graph.producer[name]))
            todo += [i for i in graph.producer[name].input if i]
        else:
            raise PosexportError(f"the bucket indices depend on {name} besides the relative positions")
    return [n for n in graph.model.graph.node if id(n) in nodes], tables


def graph_buckets(graph: Graph, rp: str, indices: str, values: np.ndarray) -> np.ndarray:
    """The graph's own bucket indices for relative positions ``values``, by onnxruntime on the nodes
    between the two tensors."""
    import onnxruntime as ort

    nodes, tables = between(graph, rp, indices)
    sub = oh.make_graph(nodes, "buckets", [oh.make_tensor_value_info(rp, onnx.TensorProto.INT64, None)],
                        [oh.make_empty_tensor_value_info(indices)], tables)
    model = oh.make_model(sub, opset_imports=list(graph.model.opset_import), ir_version=graph.model.ir_version)
    try:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {rp: values.astype(np.int64)[None, :]})[0].reshape(-1)
    except Exception as e:  # onnxruntime's own errors (a type or shape it refuses): the check cannot run
        raise PosexportError(f"onnxruntime cannot run the bucket computation alone ({one_line(str(e), 160)})") from None


class T5BiasKind(SiteKind):
    name = "t5-bias"
    summary = "T5 relative attention bias: a trained [buckets, heads] table gathered by log-spaced distance buckets"
    rebuilds = BIAS  # everything the rewrite needs is in the graph

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node, table in table_gathers(graph):
            chain = ancestors(graph, node.input[1], limit=200)
            if not any(n.op_type == "Log" for n in chain):
                continue
            recovered = {"table": node.input[0], "buckets": int(table.dims[0]), "heads": int(table.dims[1]),
                         "bidirectional": any(n.op_type == "Abs" for n in chain)}
            site = Site(self.name, node_label(node), readers(graph, node), recovered, {"gather": node, "chain": chain})
            self.recover(graph, site, chain)
            sites.append(site)
        return sites

    @staticmethod
    def recover(graph: Graph, site: Site, chain: list[onnx.NodeProto]) -> None:
        """max_distance, the two position ranges and the bias's tail; what is missing becomes ``not_patched``."""
        found, distance, tail = relative_positions(chain, graph), max_distance(chain, graph), bias_tail(graph, site.tensors["gather"])
        missing = [what for what, value in (("rp = Unsqueeze(k, 0) − Unsqueeze(q, 1)", found), ("a Log between two Divs", distance),
                                            ("Transpose(2, 0, 1) then Unsqueeze(0) after the Gather", tail)) if value is None]
        if missing:
            site.recovered["not_patched"] = "no " + "; no ".join(missing)
            return
        site.recovered["max_distance"] = distance
        site.tensors |= {"rp": found[0].output[0], "q": found[1], "k": found[2], "tail": tail}

    @staticmethod
    def params(site: Site) -> T5Params:
        r = site.recovered
        return T5Params(heads=r["heads"], num_buckets=r["buckets"], max_distance=r["max_distance"], bidirectional=r["bidirectional"],
                        output="bias")

    def check(self, graph: Graph, site: Site, nothing: Any) -> None:
        if "not_patched" in site.recovered:
            raise PosexportError(f"{site.anchor}: a T5 bias posexport does not recognise ({site.recovered['not_patched']}); refusing to guess")
        try:
            p = self.params(site)
        except PosexportError as e:
            raise PosexportError(f"{site.anchor}: the recovered T5 parameters are not valid ({e})") from None
        rp = np.arange(-2 * p.max_distance - 16, 2 * p.max_distance + 17)
        try:
            got = graph_buckets(graph, site.tensors["rp"], site.tensors["gather"].input[1], rp)
        except PosexportError as e:
            raise PosexportError(f"{site.anchor}: {e}; refusing to guess") from None
        want = relative_bucket(rp, p.bidirectional, p.num_buckets, p.max_distance)
        if not np.array_equal(got, want):
            at = rp[got != want]
            raise PosexportError(f"{site.anchor}: the graph's buckets differ from T5's (num_buckets {p.num_buckets}, max_distance "
                                 f"{p.max_distance}) at {at.size} relative positions, first {int(at[0])}; refusing to guess")

    def rewrite(self, graph: Graph, site: Site, nothing: Any) -> None:
        p, gather = self.params(site), site.tensors["gather"]
        proto = t5_position_function(p, standard_opset(min(graph.opset(), newest_opset()))).to_function_proto()
        tag = free_tag(graph.model, [proto.name])
        (proto,) = renamed([proto], tag)
        add_functions(graph.model, [proto])
        prefix = f"posexport.t5{'_' + tag if tag else ''}"
        table = graph.array(site.recovered["table"])
        graph.model.graph.initializer.append(onh.from_array(bias_by_rp_of(table, p), f"{prefix}.bias_by_rp"))
        transpose, unsqueeze = site.tensors["tail"]
        call = oh.make_node(proto.name, [site.tensors["q"], site.tensors["k"], f"{prefix}.bias_by_rp"], [unsqueeze.output[0]],
                            domain=DOMAIN, name=prefix)
        splice_nodes(graph, [gather.name, transpose.name, unsqueeze.name], [call])
        old = site.tensors["chain"] + [gather, transpose, unsqueeze]
        inputs = {i for n in old for i in n.input if i}
        remove_dead(graph.model, {n.name for n in old} | {graph.producer[i].name for i in inputs if i in graph.producer},
                    inputs & set(graph.initializers))

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        site.faults.append(Fault("bias-per-call", "bucket indices for every (query, key) pair are recomputed on every call "
                                 "(Log in float32 over q_len·k_len distances) and a [heads, q_len, k_len] bias is gathered from them: "
                                 "16.8M bucket computations per call at 4096 tokens (`posexport patch` replaces them by one "
                                 "lookup of the table's rows by clamped distance)", 4096.0 * 4096.0))
        if "not_patched" in site.recovered:
            site.notes.append(f"not patchable: {site.recovered['not_patched']}")
