"""ALiBi slopes (BLOOM), and what every bias and table site shares: where positions come from, Gathers
from 2-D tables, a tensor's ancestors. ALiBi sites are listed with their slopes and faults; the slopes are
already exact constants, so patch leaves them as they are."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx

from ..encodings.alibi import alibi_slopes
from ..onnxgraph.graph import Graph, node_label
from .sites import Fault, RefusedKind, Site

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


def slopes_of(graph: Graph, node: onnx.NodeProto) -> tuple[np.ndarray, str] | None:
    """(slopes [heads], source) of Mul(slopes [.., heads, 1], positions), else None."""
    for const_side in (0, 1):
        value = graph.array(node.input[const_side])
        if value is None or value.size < 2 or value.shape[-1] != 1 or not np.issubdtype(value.dtype, np.floating):
            continue
        source = position_source(graph, node.input[1 - const_side])
        if source is not None:
            return value.reshape(-1).astype(np.float64), source
    return None


def shown(slopes: np.ndarray) -> str:
    """The first four slopes, as the report shows them."""
    return ", ".join(f"{s:.6g}" for s in slopes[:4]) + (" …" if len(slopes) > 4 else "")


class AlibiKind(RefusedKind):
    name = "alibi"
    summary = "ALiBi: per-head slopes times positions (BLOOM, MPT, Falcon-RW)"

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node in graph.model.graph.node:
            found = slopes_of(graph, node) if node.op_type == "Mul" and node.domain in ("", "ai.onnx") else None
            if found is None:
                continue
            slopes, source = found
            recovered = {"heads": len(slopes), "slopes": shown(slopes), "positions_from": source}
            site = Site(self.name, node_label(node), readers(graph, node), recovered)
            site.tensors["slopes"] = slopes
            sites.append(site)
        return sites

    def refusal(self, site: Site) -> str:
        return "ALiBi slopes are already exact constants; nothing to patch"

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        slopes = site.tensors["slopes"]
        standard = alibi_slopes(len(slopes))
        off = float(np.max(np.abs(slopes / standard - 1)))
        site.recovered["standard_slopes"] = off <= 1e-6
        if off > 1e-6:
            worst = int(np.argmax(np.abs(slopes / standard - 1)))
            site.recovered["standard"] = shown(standard)
            site.faults.append(Fault("alibi-slopes", f"slopes {shown(slopes)} differ from the standard geometric sequence for "
                                     f"{len(slopes)} heads, {shown(standard)}, by {off:.2e} (relative; head {worst}: "
                                     f"{slopes[worst]:.6g}, standard {standard[worst]:.6g})", off))
        else:
            site.notes.append(f"standard slopes for {len(slopes)} heads (relative error {off:.1e}); positions exact in float32 up to 2^24")


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
