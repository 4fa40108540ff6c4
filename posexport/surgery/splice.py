"""``splice``: insert a posexport encoding (a rope rotation, a bias, …) at named tensors of your own
graph. Each named tensor is passed through the encoding's entry function and every reader of the
tensor (graph outputs included) reads the encoded value under the same name; nothing else changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from .. import export
from ..contract import DOMAIN
from ..errors import PosexportError
from .replace import add_functions, free_tag, renamed


def reroute(model: onnx.ModelProto, tensor: str) -> str:
    """Let ``tensor``'s producer write ``tensor.raw`` instead (graph inputs: readers are moved to the
    encoded name); returns the name the encoding reads."""
    graph = model.graph
    if any(i.name == tensor for i in graph.input):
        for node in graph.node:
            node.input[:] = [f"{tensor}.encoded" if i == tensor else i for i in node.input]
        for out in graph.output:
            if out.name == tensor:
                raise PosexportError(f"{tensor!r} is both a graph input and output; splice needs a computed tensor")
        return tensor
    for node in graph.node:
        if tensor in node.output:
            node.output[:] = [f"{tensor}.raw" if o == tensor else o for o in node.output]
            return f"{tensor}.raw"
    raise PosexportError(f"splice at {tensor!r}: no node or graph input of that name")


def splice(model: onnx.ModelProto, at: Mapping[str, str], position_ids: str | None = None, encoding: str = "rope",
           *, dtype: str = "float32", backend: str = "portable", **params: Any) -> onnx.ModelProto:
    """A copy of ``model`` with ``encoding`` (posexport's graph for ``params``) applied to each tensor
    named in ``at`` (e.g. {"q": "q_proj_out", "k": "k_proj_out"}); ``position_ids`` names the int64
    positions [batch, seq] when the encoding takes them."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    opset = next(o.version for o in out.opset_import if o.domain in ("", "ai.onnx"))
    built = export.build(encoding, dict(params), dtype=dtype, opset=max(opset, export.DEFAULT_OPSET), backend=backend)
    (entry,) = built.model.graph.node
    functions = list(built.model.functions)
    tag = free_tag(out, [f.name for f in functions])
    prefix = f"posexport.{encoding}{'_' + tag if tag else ''}"
    tables = {t.name: f"{prefix}.{t.name}" for t in built.model.graph.initializer}
    extra = [i for i in entry.input[1:] if i not in tables]
    if extra and (extra != ["position_ids"] or position_ids is None):
        raise PosexportError(f"splice {encoding}: it also takes {', '.join(extra)}; pass position_ids=")
    add_functions(out, renamed(functions, tag))
    for imp in built.model.opset_import:
        if not any(o.domain == imp.domain for o in out.opset_import):
            out.opset_import.append(imp)
    out.graph.initializer.extend(onh.from_array(onh.to_array(t), tables[t.name]) for t in built.model.graph.initializer)
    for role, tensor in at.items():
        source = reroute(out, tensor)
        target = f"{tensor}.encoded" if source == tensor else tensor
        inputs = [source] + [position_ids if i == "position_ids" else tables[i] for i in entry.input[1:]]
        out.graph.node.append(oh.make_node(f"{entry.op_type}_{tag}" if tag else entry.op_type, inputs, [target],
                                           domain=DOMAIN, name=f"{prefix}/{role}"))
    ordered = topological(out.graph)
    del out.graph.node[:]
    out.graph.node.extend(ordered)
    return out


def topological(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes ordered so each follows the producers of its inputs (stable otherwise)."""
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        progressed = [n for n in pending if all(i in ready for i in n.input)]
        if not progressed:
            raise PosexportError("splice: the graph has a cycle or an input nobody produces")
        for node in progressed:
            ordered.append(node)
            ready.update(node.output)
        pending = [n for n in pending if n not in progressed]
    return ordered
