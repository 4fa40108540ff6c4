"""The matching the site kinds share, in the spirit of onnxscript's rewriter: a kind's pattern says what it matches
(the producers walked up from a tensor, ``up`` and ``through`` here), its check why replacing a match is safe, and a
pattern that does not match returns a Miss saying why (falsy, so a kind reads it as no match). Beside them: where
positions come from, Gathers from 2-D tables, a table that is a sin|cos table, a tensor's ancestors and readers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import onnx

from ..onnxgraph.graph import Graph, node_label

@dataclass(frozen=True)
class Miss:
    """Why a pattern did not match (where, and what it found there instead); false in a test."""

    why: str

    def __bool__(self) -> bool:
        return False


def up(graph: Graph, tensor: str, *ops: str) -> onnx.NodeProto | Miss:
    """The node making ``tensor``, when its op is one of ``ops``."""
    node = graph.producer.get(tensor)
    if node is None:
        return Miss(f"{tensor} is a graph input or a stored tensor, not made by {' or '.join(ops)}")
    if node.op_type not in ops:
        return Miss(f"{tensor} is made by {node_label(node)}, not by {' or '.join(ops)}")
    return node


def through(graph: Graph, tensor: str, passed: tuple[str, ...]) -> tuple[str, onnx.NodeProto | None]:
    """The tensor ``tensor`` is under any run of ``passed`` ops (each read through its first input), and its producer."""
    node = graph.producer.get(tensor)
    while node is not None and node.op_type in passed:
        tensor = node.input[0]
        node = graph.producer.get(tensor)
    return tensor, node


def sin_cos(table: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(sin, cos) halves of a table whose row 0 is [0 … 0 | 1 … 1] and whose rows all lie on the unit circle (a
    sin|cos table, the sincos-table kind's)."""
    if table is None or table.ndim != 2 or table.shape[1] % 2 or table.shape[0] < 3 or table.dtype.kind != "f":
        return None
    half = table.shape[1] // 2
    sin, cos = table[:, :half].astype(np.float64), table[:, half:].astype(np.float64)
    if not (np.allclose(sin[0], 0, atol=1e-6) and np.allclose(cos[0], 1, atol=1e-6)):
        return None
    return (sin, cos) if np.allclose(sin * sin + cos * cos, 1, atol=1e-5) else None


# Nodes an index or position tensor passes through on its way from its source.
PASS_THROUGH = ("Unsqueeze", "Squeeze", "Reshape", "Cast", "Expand", "Tile", "Add", "Sub", "Mul", "Identity")


def position_source(graph: Graph, name: str, depth: int = 0) -> str | None:
    """What positions ``name`` derives from: 'Range' (0 … seq−1 every call), 'CumSum' (of the attention
    mask), 'Slice' (of a constant 0 … M−1, BERT's buffer), or the graph input holding position ids; None
    when it derives from token ids or nothing."""
    if depth > 12:
        return None
    node = graph.producer.get(name)
    if node is None:
        return name if "position" in name.lower() and name not in graph.initializers else None
    if node.op_type in ("Range", "CumSum"):
        return node.op_type
    if node.op_type == "Slice":
        data = graph.array(node.input[0])
        arange = data is not None and data.dtype.kind in "iu" and np.array_equal(data.reshape(-1), np.arange(data.size))
        return "Slice" if arange and data.size > 1 else None
    if node.op_type not in PASS_THROUGH:
        return None
    found = [position_source(graph, i, depth + 1) for i in node.input if i and not graph.is_constant(i)]
    return next((f for f in found if f), None)


def table_gathers(graph: Graph) -> Iterator[tuple[onnx.NodeProto, onnx.TensorProto]]:
    """Gather nodes reading rows of a 2-D float initializer, with that initializer."""
    for node in graph.model.graph.node:
        if node.op_type == "Gather" and node.domain in ("", "ai.onnx") and len(node.input) > 1:
            table = graph.initializers.get(node.input[0])
            if table is not None and len(table.dims) == 2 and table.data_type in (1, 10, 16):
                yield node, table


def readers(graph: Graph, node: onnx.NodeProto) -> list[str]:
    return [c.name for c in graph.consumers.get(node.output[0], [])]


def ancestors(graph: Graph, name: str, limit: int = 40) -> list[onnx.NodeProto]:
    """Up to ``limit`` nodes that ``name`` is computed from, nearest first."""
    seen, todo, out = set(), [name], []
    while todo and len(out) < limit:
        node = graph.producer.get(todo.pop(0))
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        todo += [i for i in node.input if i]
    return out
