"""A rope read from a constant sin|cos table by position: GPT-J's ``embed_positions`` (transformers 5:
``sin(p·f) | cos(p·f)`` over [max_positions, rotary_dim], read with Gather, or GatherElements of the table
repeated per batch, then split into sin and cos). There is no Cos or Sin in the graph, so the rope kinds do
not see it. Listed with the frequencies read back from the table, its position limit (past its rows the
Gather raises) and its precision against float64; patch leaves it alone (the pair layout and the split
that follow the gather are not rewritten)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tables import plain_inv_freq
from .biases import position_source, readers
from .freqs import PRECISION_FAULT, cache_error, describe, from_cache, recognise
from .graph import Graph, node_label
from .sites import Fault, RefusedKind, Site

GATHERS = ("Gather", "GatherElements")


def table_of(graph: Graph, name: str) -> np.ndarray | None:
    """The 2-D (or [1, rows, width], repeated per batch) float constant ``name`` is, or is a Tile/Expand of."""
    node = graph.producer.get(name)
    if node is not None and node.op_type in ("Tile", "Expand"):
        return table_of(graph, node.input[0])
    value = graph.array(name)
    if value is None or value.dtype.kind != "f":
        return None
    value = value.reshape(value.shape[-2:]) if value.ndim == 3 and value.shape[0] == 1 else value
    return value if value.ndim == 2 else None


def sin_cos(table: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(sin, cos) halves of a table whose row 0 is [0 … 0 | 1 … 1] and whose rows all lie on the unit circle."""
    if table is None or table.ndim != 2 or table.shape[1] % 2 or table.shape[0] < 3 or table.dtype.kind != "f":
        return None
    half = table.shape[1] // 2
    sin, cos = table[:, :half].astype(np.float64), table[:, half:].astype(np.float64)
    if not (np.allclose(sin[0], 0, atol=1e-6) and np.allclose(cos[0], 1, atol=1e-6)):
        return None
    return (sin, cos) if np.allclose(sin * sin + cos * cos, 1, atol=1e-5) else None


class SinCosTableKind(RefusedKind):
    name = "sincos-table"
    summary = "Gather by position from a constant sin|cos table (GPT-J's embed_positions)"

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node in graph.model.graph.node:
            if node.op_type not in GATHERS or node.domain not in ("", "ai.onnx") or len(node.input) < 2:
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
            sites.append(Site(self.name, node_label(node), readers(graph, node), recovered, {"halves": halves, "inv_freq": inv_freq}))
        return sites

    def refusal(self, site: Site) -> str:
        return "a sin|cos table read by Gather; posexport does not rewrite it yet (see `posexport doctor`)"

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        rows = site.recovered["rows"]
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
