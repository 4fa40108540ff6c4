"""A rope read from a constant sin|cos table by position: GPT-J's ``embed_positions`` (transformers 5:
``sin(p·f) | cos(p·f)`` over [max_positions, rotary_dim], read with Gather (TorchScript), GatherND of the
positions unsqueezed (dynamo), or GatherElements of the table repeated per batch (transformers 4.x), then
split into sin and cos). There is no Cos or Sin in the graph, so the rope kinds do
not see it. Listed with the frequencies read back from the table, its position limit (past its rows the
Gather raises) and its precision against float64. The rewrite rebuilds the table from float64 angles,
rounded once to its float type, to the position limit; the gather, the split and the pair layout that
follow it are left as they are."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..errors import PosexportError
from ..onnxgraph.graph import Graph, attribute, node_label, set_constant
from ..rope import encoding as rope
from ..rope.scaling import DYNAMIC, REGIMES, source_of
from ..tables import plain_inv_freq
from .pattern import position_source, readers, sin_cos
from .freqs import PRECISION_FAULT, cache_error, close_to_cache, describe, exact_from, from_cache, recognise
from .rebuilds import ROPE
from .recorded import chosen_limits, record_limit
from .sites import Fault, Mismatch, Site, SiteKind

GATHERS = ("Gather", "GatherElements", "GatherND")
REPEATS = ("Tile", "Expand")  # the table repeated per batch before GatherElements


def table_source(graph: Graph, name: str) -> str:
    """The tensor ``name`` is, or is a Tile/Expand of (the table itself)."""
    node = graph.producer.get(name)
    return table_source(graph, node.input[0]) if node is not None and node.op_type in REPEATS else name


def table_of(graph: Graph, name: str) -> np.ndarray | None:
    """The 2-D (or [1, rows, width], repeated per batch) float constant ``name`` is, or is a Tile/Expand of."""
    value = graph.array(table_source(graph, name))
    if value is None or value.dtype.kind != "f":
        return None
    value = value.reshape(value.shape[-2:]) if value.ndim == 3 and value.shape[0] == 1 else value
    return value if value.ndim == 2 else None


def reads_rows(graph: Graph, node: onnx.NodeProto) -> bool:
    """Gather and GatherElements read one row per position; GatherND (torch.onnx dynamo's form) does when its
    batch_dims is 0 and its indices are the positions unsqueezed at the last axis ([…, 1]: one row each)."""
    if node.op_type != "GatherND":
        return True
    index = graph.producer.get(node.input[1])
    axes = graph.array(index.input[1]) if index is not None and index.op_type == "Unsqueeze" and len(index.input) > 1 else None
    return attribute(node, "batch_dims", 0) == 0 and axes is not None and axes.reshape(-1).tolist() == [-1]


def other_readers(graph: Graph, gathered: str, table: str) -> list[str]:
    """Nodes other than the site's gather (its output ``gathered``) and the Tile/Expand leading to it that
    read the table."""
    found, todo = [], [table]
    while todo:
        for node in graph.consumers.get(todo.pop(), []):
            if node.op_type in REPEATS:
                todo.append(node.output[0])
            elif node.output[0] != gathered:
                found.append(node_label(node))
    return found


class SinCosTableKind(SiteKind):
    name = "sincos-table"
    summary = "Gather by position from a constant sin|cos table (GPT-J's embed_positions)"
    rebuilds = ROPE

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node in graph.model.graph.node:
            if node.op_type not in GATHERS or node.domain not in ("", "ai.onnx") or len(node.input) < 2 or not reads_rows(graph, node):
                continue
            # Positions first, from the graph alone: an embedding table gathered by token ids is never read.
            source = position_source(graph, node.input[1])
            table = table_of(graph, node.input[0]) if source is not None else None
            halves = sin_cos(table)
            if halves is None:
                continue
            inv_freq, _ = from_cache(halves[1], halves[0])
            recovered = {"op": node.op_type, "rows": int(table.shape[0]), "rotary_dim": int(table.shape[1]), "layout": "sin | cos",
                         "dtype": str(table.dtype), "inv_freq": describe(inv_freq), "recognised": recognise(inv_freq),
                         "positions_from": source}
            tensors = {"halves": halves, "inv_freq": inv_freq, "table": table_source(graph, node.input[0]), "gathered": node.output[0]}
            sites.append(Site(self.name, node_label(node), readers(graph, node), recovered, tensors))
        return sites

    def check(self, graph: Graph, site: Site, p: rope.RopeParams) -> None:
        """Safe when the table is this gather's alone, and the parameters give its frequencies (no attention
        factor: row 0 is [0 | 1]) from one fixed set (a per-call scaling cannot live in a table)."""
        others = other_readers(graph, site.tensors["gathered"], site.tensors["table"])
        if others:
            raise PosexportError(f"{site.anchor}: its table is also read by {', '.join(others[:3])}; rebuilding it would change them")
        if source_of(p) in (DYNAMIC, REGIMES):
            raise PosexportError(f"{site.anchor}: a fixed sin|cos table cannot follow the {p.scaling} scaling; refusing to guess")
        inv_freq, factor = rope.inv_freq_and_factor(p)
        got = site.tensors["inv_freq"]
        if abs(factor - 1) > 1e-6 or not close_to_cache(got, inv_freq, table_of(graph, site.tensors["table"])):
            raise Mismatch(f"{site.anchor}: the table holds frequencies {describe(got)}, not those of the {p.scaling} rope "
                           f"asked for ({describe(inv_freq)}, factor {factor:g})")

    def rewrite(self, graph: Graph, site: Site, p: rope.RopeParams) -> None:
        stored = graph.array(site.tensors["table"])
        cos, sin = exact_from(rope.inv_freq_and_factor(p)[0], 1.0, np.arange(p.position_limit))
        table = np.concatenate([sin, cos], axis=1).astype(stored.dtype)  # float64 rounded once
        set_constant(graph, site.tensors["table"], table.reshape(stored.shape[:-2] + table.shape))
        record_limit(graph.model, site.tensors["table"], p.position_limit)

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        rows = site.recovered["rows"]
        if chosen_limits(graph.model).get(site.tensors["table"]) == rows:
            site.notes.append(f"position limit {rows} (chosen with posexport patch)")
        else:
            site.faults.append(Fault("position-limit", f"the table stops at position {rows - 1}; past it onnxruntime's "
                                     f"{site.recovered['op']} raises (indices out of data bounds)", rows))
        recognised = site.recovered["recognised"]
        if recognised is None:
            site.notes.append("frequencies not recognised as plain or linear rope: precision not measured")
            return
        sin, cos = site.tensors["halves"]
        factor = recognised.get("factor", 1.0)
        error = cache_error(cos, sin, (plain_inv_freq(recognised["head_dim"], recognised["base"]) / factor, 1.0), rows - 1)
        scaled = f", linear factor {factor:g}" if "factor" in recognised else ""
        detail = f"sin/cos vs float64 (base {recognised['base']:g}{scaled}): {error:.2e} at row {rows - 1}"
        if error > PRECISION_FAULT:
            site.faults.append(Fault("precision", detail, error))
        else:
            site.notes.append(detail + " (exact to float rounding)")
