"""Learned absolute position tables: Gather from a trained [rows, width] initializer by positions (GPT-2's
wpe, OPT, BERT/RoBERTa, Whisper's decoder). Row ``offset + p`` holds position p: OPT and RoBERTa keep
rows before position 0's (OPT's offset 2, RoBERTa's padding_idx + 1), read here from the index path itself.

``patch --extend-learned N --strategy mean|interpolate`` grows the table to N positions with
posexport.extend's float64 strategies (rows before the offset kept), and every constant sized by the old
limit on the index path with it: BERT's position-ids buffer (0 … M−1, sliced per call) becomes 0 … N−1, and
buffers gathered by those positions (BERT's all-zero token types) grow with their one value. With ``mean``
the rows of positions below the old limit are the original rows bit for bit, so the model's outputs there
are unchanged; ``interpolate`` resamples every row (position interpolation)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from ..encodings.learned import STRATEGIES, check_rows, extend_table
from ..errors import PosexportError
from ..onnxgraph.graph import Graph, node_label, set_constant, whole_length
from .caches import cache_gathers
from .pattern import PASS_THROUGH, Miss, position_source, readers, sin_cos, table_gathers, through, up
from .rebuilds import TABLE
from .recorded import chosen_limits, record_limit
from .sites import Fault, Site, SiteKind

SOURCES = {"Range": "Range: 0 … seq−1 on every call", "CumSum": "CumSum of the attention mask",
           "Slice": "a constant 0 … M−1 sliced to each call's positions"}
# The rows a table Slice starts at: the past length, a dimension of a graph input (onnxruntime-genai's Whisper decoder
# slices rows past … past + seq − 1 of its table), passed through these.
PAST_STEPS = ("Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity")
# What onnxruntime does with positions past the table, gathered or sliced from it.
GATHERED_PAST = "onnxruntime's Gather raises (indices out of data bounds) or the model's shapes no longer agree"
SLICED_PAST = ("the Slice returns fewer rows: onnxruntime raises when a call's tokens run past the table (the Add's shapes "
               "disagree), and a call that starts there returns no rows at all, without an error")
# Position 0 reads this much of its source: CumSum of a mask of ones counts from 1.
FIRST = {"CumSum": 1, "Slice": 0}


@dataclass(frozen=True)
class Extension:
    """``--extend-learned ROWS --strategy STRATEGY``: positions the table covers after the patch."""

    rows: int
    strategy: str = "mean"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise PosexportError(f"--strategy {self.strategy!r}: choose one of {', '.join(STRATEGIES)}")
        if not isinstance(self.rows, int) or self.rows < 1:
            raise PosexportError(f"--extend-learned {self.rows}: give the number of positions the table should cover")


def first_row(graph: Graph, name: str, depth: int = 0) -> int | None:
    """The table row position 0 reads through the index path ending at ``name``: the source's first value
    plus every constant added or subtracted on the way; None when a step is anything else."""
    node = graph.producer.get(name)
    if node is None:
        return 0  # position ids given as an input
    if node.op_type == "Range":  # from a constant start (RoBERTa's padding_idx + 1), else the past length
        start = graph.array(node.input[0])
        return whole_length(start, signed=True) if start is not None else 0
    if node.op_type in FIRST:
        return FIRST[node.op_type]
    if node.op_type not in PASS_THROUGH or depth > 12:
        return None
    if node.op_type not in ("Add", "Sub", "Mul"):
        return first_row(graph, node.input[0], depth + 1)
    moving = [i for i in node.input if graph.array(i) is None and position_source(graph, i)]
    consts = [v for v in map(graph.array, node.input) if v is not None]
    if len(moving) != 1 or any(v.size != 1 for v in consts):
        return None
    below = first_row(graph, moving[0], depth + 1)
    if below is None or not consts:  # times the mask (1 where there are tokens): positions unchanged
        return below
    c = whole_length(consts[0], signed=True)
    if c is None:
        return None
    if node.op_type == "Add":
        return below + c
    if node.op_type == "Sub" and moving[0] == node.input[0]:
        return below - c
    return below if node.op_type == "Mul" and c == 1 else None


def index_path(graph: Graph, name: str) -> list[onnx.NodeProto]:
    """The nodes the table's indices are computed by, back to their source (never past a Slice)."""
    out, todo = [], [name]
    while todo:
        node = graph.producer.get(todo.pop())
        if node is None or node in out:
            continue
        out.append(node)
        if node.op_type in PASS_THROUGH:
            todo += [i for i in node.input if i and graph.array(i) is None]
    return out


def sized_buffers(graph: Graph, name: str) -> tuple[list[onnx.NodeProto], list[onnx.NodeProto]]:
    """(Slice nodes on the index path, from a buffer that must be a constant 0 … M−1: BERT's position_ids;
    GatherElements nodes that read a buffer by positions of the path: BERT's and RoBERTa's token types)."""
    path = index_path(graph, name)
    slices = [n for n in path if n.op_type == "Slice"]
    readers = [c for n in path for o in n.output for c in graph.consumers_of(o, "GatherElements") if c.input[1] == o]
    return slices, readers


def past_length(graph: Graph, name: str) -> str | Miss:
    """The graph input whose dimension ``name`` is (Gather(Shape(input), k) under Unsqueeze/Cast/…), said in words."""
    tensor, node = through(graph, name, PAST_STEPS)
    gather = up(graph, tensor, "Gather")
    shape = up(graph, gather.input[0], "Shape") if gather else gather
    if not shape:
        return shape
    axis = graph.array(gather.input[1])
    if axis is None or axis.size != 1 or shape.input[0] not in {i.name for i in graph.model.graph.input}:
        return Miss(f"{node_label(gather)} reads no fixed dimension of a graph input")
    return f"dimension {int(axis.reshape(()))} of {shape.input[0]} (the positions already cached)"


def table_slices(graph: Graph) -> Iterator[tuple[onnx.NodeProto, onnx.TensorProto, str]]:
    """Slices of rows (axis 0, step 1) of a 2-D float initializer starting at the past length, with the table and
    where the start comes from: the rows of positions past … past + seq − 1, read without a Gather."""
    for node in graph.model.graph.node:
        if node.op_type != "Slice" or node.domain not in ("", "ai.onnx") or len(node.input) < 3:
            continue
        table = graph.initializers.get(node.input[0])
        axes = graph.array(node.input[3]) if len(node.input) > 3 and node.input[3] else np.array([0])
        steps = graph.array(node.input[4]) if len(node.input) > 4 and node.input[4] else np.array([1])
        if table is None or len(table.dims) != 2 or table.data_type not in (1, 10, 16) or axes is None or steps is None:
            continue
        start = past_length(graph, node.input[1])
        if start and list(axes.ravel()) == [0] and list(steps.ravel()) == [1]:
            yield node, table, start


def constant_source(graph: Graph, name: str) -> str | None:
    """The constant (initializer or Constant output) ``name`` is, or is an Expand of."""
    node = graph.producer.get(name)
    if node is not None and node.op_type == "Expand":
        return constant_source(graph, node.input[0])
    return name if graph.array(name) is not None else None


class LearnedTableKind(SiteKind):
    name = "learned-table"
    summary = "Gather from a trained [max_positions, d] table by position (GPT-2 wpe, OPT, BERT, Whisper's decoder)"
    patchable = False  # trained weights: patch extends them only when asked (--extend-learned)
    rebuilds = TABLE

    def match(self, graph: Graph) -> list[Site]:
        sites, rope_caches = [], cache_gathers(graph)
        for node, table in table_gathers(graph):
            source = position_source(graph, node.input[1])
            # A sin|cos table is SinCosTableKind's; rows a fused rotary op reads as cos/sin, the rope cache kinds'.
            if source is None or node.name in rope_caches or sin_cos(graph.array(node.input[0])) is not None:
                continue
            offset = first_row(graph, node.input[1])
            rows = int(table.dims[0])
            recovered = {"table": node.input[0], "rows": rows, "width": int(table.dims[1]),
                         "positions_from": SOURCES.get(source, source), "offset": offset,
                         "positions": rows - offset if offset is not None else None}
            sites.append(Site(self.name, node_label(node), readers(graph, node), recovered,
                              {"indices": node.input[1], "gather": node.name}))
        for node, table, start in table_slices(graph):
            rows = int(table.dims[0])
            recovered = {"table": node.input[0], "rows": rows, "width": int(table.dims[1]),
                         "positions_from": f"a Slice of the table's rows from {start}", "offset": 0, "positions": rows}
            sites.append(Site(self.name, node_label(node), readers(graph, node), recovered,
                              {"indices": node.input[1], "gather": node.name}))
        return sites

    def check(self, graph: Graph, site: Site, extension: Extension | None) -> None:
        positions, table = site.recovered["positions"], site.recovered["table"]
        if extension is None:
            raise PosexportError(f"{site.anchor}: a trained table; `posexport patch --extend-learned N` grows it")
        if positions is None:
            raise PosexportError(f"{site.anchor}: which row holds position 0 cannot be read from its index path; refusing to guess")
        others = [n.name for n in graph.consumers.get(table, []) if n.name != site.tensors["gather"]]
        if others:
            raise PosexportError(f"{site.anchor}: its table {table} is also read by {', '.join(others[:3])}; growing it would change them")
        try:
            check_rows(extension.rows, positions, site.recovered["width"])
        except PosexportError as e:
            raise PosexportError(f"--extend-learned {extension.rows}: {str(e).split(': ', 1)[1]} ({site.anchor})") from None
        slices, readers = sized_buffers(graph, site.tensors["indices"])
        for node in slices:
            buffer = graph.array(node.input[0])
            if buffer is None or not np.array_equal(buffer.reshape(-1), np.arange(buffer.size)):
                raise PosexportError(f"{site.anchor}: its positions are sliced by {node_label(node)} from something other than "
                                     "a constant 0 … M−1; refusing to guess how it grows")
        for reader in readers:
            data = constant_source(graph, reader.input[0])
            if data is None or np.unique(graph.array(data)).size != 1:
                raise PosexportError(f"{node_label(reader)} gathers by the positions from a buffer that is not one constant "
                                     "value; refusing to guess how it grows")

    def rewrite(self, graph: Graph, site: Site, extension: Extension) -> None:
        table, offset = graph.array(site.recovered["table"]), site.recovered["offset"]
        grown = extend_table(table[offset:], extension.rows, extension.strategy)
        set_constant(graph, site.recovered["table"], np.concatenate([table[:offset], grown.astype(table.dtype)]))
        more = extension.rows - site.recovered["positions"]  # every buffer grows by as many positions as the table
        slices, readers = sized_buffers(graph, site.tensors["indices"])
        for reader in readers:
            data = constant_source(graph, reader.input[0])
            value = graph.array(data)
            set_constant(graph, data, np.full(value.shape[:-1] + (value.shape[-1] + more,), value.reshape(-1)[0], value.dtype))
        for node in slices:
            buffer = graph.array(node.input[0])
            set_constant(graph, node.input[0], np.arange(buffer.shape[-1] + more, dtype=buffer.dtype).reshape(buffer.shape[:-1] + (-1,)))
        record_limit(graph.model, site.recovered["table"], extension.rows)

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        positions = site.recovered["positions"]
        if positions is None:
            site.faults.append(Fault("position-limit", f"the table has {site.recovered['rows']} rows; which one holds position 0 "
                                     "is not read from its index path", site.recovered["rows"]))
        elif chosen_limits(graph.model).get(site.recovered["table"]) == positions:
            site.notes.append(f"position limit {positions} (extended with posexport patch --extend-learned)")
        else:
            at = f" (rows {site.recovered['offset']} … {site.recovered['rows'] - 1})" if site.recovered["offset"] else ""
            past = SLICED_PAST if site.recovered["positions_from"].startswith("a Slice") else GATHERED_PAST
            site.faults.append(Fault("position-limit", f"the table holds {positions} positions{at}; position {positions} and beyond: "
                                     f"{past}; there is no trained value there (`posexport patch --extend-learned N`)", positions))
        if site.recovered["positions_from"].startswith("Range"):
            site.notes.append("positions restart at 0 on every call: decoding with past key/values needs position ids as an input")
