"""Run-time checks a graph makes on its inputs, cheap enough for every call (docs/contract.md).

``position_ids`` must be [batch, seq] of its x: ONNX broadcasting would otherwise serve x [2, 3, ...]
with position_ids [2, 1] (every token at one position) without a word. The check reads two shapes and
does a handful of scalar ops, nothing that grows with the sequence; its failing node is named, so that
onnxruntime's message says what was wrong. A position outside the graph's range makes the lookup's
Gather raise; those nodes are named too (:func:`name_nodes`).

OpenVINO's Gather returns zeros for an out-of-range index instead of raising: there, only a
position_ids whose size differs from [batch, seq] raises (at the Reshape), and positions past the
graph's range are a known limitation (docs/runtimes.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
import onnx.helper as oh
from onnxscript import script

from ..contract import DOMAIN, DOMAIN_VERSION, TensorSpec
from ..script import POSEXPORT, standard_opset

NOT_BATCH_SEQ = "position_ids_is_not_batch_seq_of_x"
OUT_OF_RANGE = "position_ids_out_of_range"


def shared_axes(inputs: Sequence[TensorSpec]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Where each axis of position_ids gets its size: (indices into shape(x) followed by the fixed sizes,
    the fixed sizes). x [batch, seq, ...] and position_ids [batch, seq] give ((0, 1), ()); M-RoPE's
    position_ids [3, batch, seq] give ((r, 0, 1), (3,)) for x of rank r."""
    x, positions = inputs[0], next(s for s in inputs if s.name == "position_ids")
    fixed = tuple(d for d in positions.dims if not isinstance(d, str))
    rank, found = len(x.dims), iter(range(len(fixed)))
    return tuple(x.dims.index(d) if isinstance(d, str) else rank + next(found) for d in positions.dims), fixed


def position_guard(axes: tuple[tuple[int, ...], tuple[int, ...]], op: Any) -> Any:
    """posexport.CheckPositionIds(x, position_ids) -> position_ids, unchanged when its shape is what
    ``axes`` (see :func:`shared_axes`) says; otherwise the run raises at the node named NOT_BATCH_SEQ.

    Gather from a one-element tensor accepts the indices −1 and 0 only: |shape(position_ids) − want|
    is 0 when the shapes agree and at least 1 on any axis that differs. The Reshape to the wanted shape
    (no copy) keeps the check on the path to the output, so no runtime drops it, and itself raises where
    the sizes differ (on runtimes whose Gather does not check its indices)."""
    indices, fixed = list(axes[0]), list(axes[1])

    @script(POSEXPORT, default_opset=op)
    def CheckPositionIds(x, position_ids):
        if fixed:
            sizes = op.Concat(op.Shape(x), op.Constant(value_ints=fixed), axis=0)
        else:
            sizes = op.Shape(x)
        want = op.Gather(sizes, op.Constant(value_ints=indices))
        zeros = op.Gather(op.Constant(value_ints=[0]), op.Abs(op.Sub(op.Shape(position_ids), want)))
        return op.Reshape(position_ids, op.Add(want, zeros))

    name_nodes(CheckPositionIds, "Gather", NOT_BATCH_SEQ, skip=1)
    return CheckPositionIds


def name_nodes(function: Any, op_type: str, name: str, skip: int = 0) -> Any:
    """Name the ``op_type`` nodes of an onnxscript function (after the first ``skip``), so that a
    runtime's error names the cause: ``name``, then ``name_2``, ``name_3`` … when there are several."""
    nodes = [n for n in function.function_ir if n.op_type == op_type][skip:]
    for i, node in enumerate(nodes):
        node.name = name if i == 0 else f"{name}_{i + 1}"
    return function


def guard_graph(model: onnx.ModelProto, inputs: Sequence[TensorSpec], opset: int) -> onnx.ModelProto:
    """A graph made elsewhere (the torch export) given the same check: a CheckPositionIds node in front,
    and every node that read position_ids reading its checked copy; its table lookups are named as the
    script graphs' are. Graphs without position_ids are returned as they are."""
    if not any(s.name == "position_ids" for s in inputs):
        return model
    guard = position_guard(shared_axes(inputs), standard_opset(opset))
    checked = "position_ids_checked"
    reading(model.graph, "position_ids", checked)
    model.graph.node.insert(0, oh.make_node(guard.name, [inputs[0].name, "position_ids"], [checked], domain=DOMAIN, name=guard.name))
    model.functions.append(guard.to_function_proto())
    tables = {t.name for t in model.graph.initializer}
    lookups = [n for n in model.graph.node if n.op_type == "Gather" and n.input[0] in tables]
    for i, node in enumerate(lookups):  # a table lookup raises only for a position outside the tables
        node.name = OUT_OF_RANGE if i == 0 else f"{OUT_OF_RANGE}_{i + 1}"
    if all(o.domain != DOMAIN for o in model.opset_import):
        model.opset_import.append(oh.make_opsetid(DOMAIN, DOMAIN_VERSION))
    return model


def reading(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Every node of ``graph`` and of its subgraphs that reads ``old`` reads ``new`` instead."""
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                reading(sub, old, new)
