"""Fused rotary ops reading cos/sin rows gathered by position from constant caches (mobius-onnx):

    Gather(cos_cache [rows, n], position_ids) ─▶ RotaryEmbedding(x, cos [b, s, n], sin [b, s, n])

and LongRoPE's one pair of tables holding both regimes, the short rows 0 … L0−1 and the long rows after
them, gathered at ``position_ids + L0 · Cast(ReduceMax(position_ids) > L0 − 1)``: the long rows once the
call's largest position reaches L0, which is transformers' switch (max(position_ids) + 1 > L0).

The tables are caches like the rope-cache kind's, and are checked, rewritten and diagnosed as those are:
past their rows onnxruntime's Gather raises; the rewrite rebuilds them from float64 angles (the long or
only rows up to the position limit, the short rows at L0) in their own float type. The Gathers, the index
arithmetic (L0 stays the offset of the long rows) and the op are left as they are."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper as onh

from ..onnxgraph.graph import Graph
from .caches import PASSED, CachePair, CacheSites, gathered, stored
from .pattern import through
from .sites import Site


def under_passed(graph: Graph, name: str) -> str:
    """The tensor ``name`` is, under Reshape/Cast/Squeeze/Unsqueeze/Identity."""
    return through(graph, name, PASSED)[0]


def graph_input(graph: Graph, name: str) -> str | None:
    """The graph input (not a stored tensor) ``name`` is, under the passed ops."""
    source = under_passed(graph, name)
    inputs = {i.name for i in graph.model.graph.input}
    return source if source in inputs and source not in graph.initializers else None


def scalar_int(graph: Graph, name: str) -> int | None:
    value = graph.array(name)
    return int(value.reshape(())) if value is not None and value.size == 1 and value.dtype.kind in "iu" else None


def long_offset(graph: Graph, name: str, positions: str) -> int | None:
    """L0 of ``L0 · Cast(ReduceMax(positions) > L0 − 1)`` (either order of the Mul), else None."""
    mul = graph.producer.get(name)
    if mul is None or mul.op_type != "Mul":
        return None
    for flag, constant in ((mul.input[0], mul.input[1]), (mul.input[1], mul.input[0])):
        offset, greater = scalar_int(graph, constant), graph.producer.get(under_passed(graph, flag))
        if offset is None or greater is None or greater.op_type != "Greater":
            continue
        reduce = graph.producer.get(greater.input[0])
        whole = reduce is not None and reduce.op_type == "ReduceMax" and (len(reduce.input) < 2 or not reduce.input[1])
        if whole and graph_input(graph, reduce.input[0]) == positions and scalar_int(graph, greater.input[1]) == offset - 1:
            return offset
    return None


def positions_read(graph: Graph, indices: str) -> tuple[str, int | None] | None:
    """(the positions input, L0 or None) of the Gathers' indices: the positions themselves, or LongRoPE's
    positions + L0 · (max(positions) > L0 − 1); None for anything else."""
    positions = graph_input(graph, indices)
    if positions is not None:
        return positions, None
    add = graph.producer.get(under_passed(graph, indices))
    if add is None or add.op_type != "Add":
        return None
    for moving, other in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        positions = graph_input(graph, moving)
        offset = long_offset(graph, other, positions) if positions is not None else None
        if offset is not None:
            return positions, offset
    return None


def stacked(graph: Graph, cos: str, sin: str, offset: int) -> list[CachePair] | None:
    """The short rows [0, offset) and the long rows [offset, …) of one stored table pair; writing either
    part writes the whole table, the other part as it stands."""
    whole = stored(graph, cos, sin)
    if whole is None or whole.cos.ndim != 2 or not 0 < offset < len(whole.cos):
        return None
    parts = [[whole.cos[:offset], whole.sin[:offset]], [whole.cos[offset:], whole.sin[offset:]]]

    def writer(index: int):
        def write(new_cos: np.ndarray, new_sin: np.ndarray) -> None:
            parts[index] = [new_cos, new_sin]
            for name, column in ((cos, 0), (sin, 1)):
                graph.initializers[name].CopyFrom(onh.from_array(np.concatenate([p[column] for p in parts]), name))
        return write

    return [CachePair(*parts[0], writer(0)), CachePair(*parts[1], writer(1))]


class GatheredCacheKind(CacheSites):
    name = "rope-cache-gathered"
    summary = "fused rotary op reading cos/sin rows gathered by position from constant caches (mobius-onnx)"

    def claims(self, graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str]) -> bool:
        return gathered(graph, node, spec) is not None

    def new_site(self, graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str], key: tuple[str, str]) -> Site:
        site = self.site_at(node, spec, key)
        cos, sin = gathered(graph, node, spec)
        tables = cos.input[0], sin.input[0]
        site.tensors["cos"] = tables[0]  # the table's name: where a chosen position limit is recorded
        read = positions_read(graph, cos.input[1]) if cos.input[1] == sin.input[1] else None
        site.recovered["gathered_from"] = list(tables)
        if read is None:
            why = (f"rows gathered from {tables[0]} and {tables[1]} by indices that are neither the position ids nor LongRoPE's "
                   "position_ids + L0·(max(position_ids) > L0 − 1)")
            return self.read_back(site, None, why)
        positions, offset = read
        site.recovered["positions"] = positions if offset is None else f"{positions} + {offset}·(max({positions}) > {offset - 1})"
        pairs = [stored(graph, *tables)] if offset is None else stacked(graph, *tables, offset)
        why = f"tables {tables[0]}, {tables[1]} with no [rows, n] rows past row {offset}"
        return self.read_back(site, (pairs, offset) if pairs else None, why)

    def past_limit(self, site: Site) -> str:
        return "onnxruntime's Gather raises (indices element out of data bounds)"

