"""Rotary cos/sin widened in the graph to interleaved pairs (Cohere: each frequency repeated twice in a
row, torch's repeat_interleave, exported as Unsqueeze(-1)─Expand(…, 2) (dynamo) or Tile(1, …, 2) (TorchScript)─Reshape):

    position_ids ─Unsqueeze(-1)─Cast─Mul(inv_freq [n])─Unsqueeze(-1)─Expand─Reshape─Cos / Sin ─▶ cos, sin

The angles are the per-call Mul form's (rope-inv-freq); the rewrite widens posexport's cos/sin the same
way (θ0, θ0, θ1, θ1, …), so the rotation downstream reads the channels it read before."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..onnxgraph.graph import Graph, node_label
from .pattern import Miss, up
from .per_call import PerCallKind, trace_product


def repeated_twice(graph: Graph, angle: str) -> tuple[str, list[str]] | Miss:
    """(the angles [..., n], nodes passed) under Reshape(Expand or Tile(Unsqueeze(angles, -1), [..., 2]), [..., 2n])."""
    reshape = up(graph, angle, "Reshape")
    expand = up(graph, reshape.input[0], "Expand", "Tile") if reshape else reshape
    unsqueeze = up(graph, expand.input[0], "Unsqueeze") if expand else expand
    if not unsqueeze:
        return unsqueeze
    if len(unsqueeze.input) < 2:
        return Miss(f"{node_label(unsqueeze)} takes its axes as an attribute (opset < 13)")
    axes, shape = graph.array(unsqueeze.input[1]), graph.array(expand.input[1])
    if expand.op_type == "Tile" and (shape is None or np.any(np.ravel(shape)[:-1] != 1)):
        return Miss(f"{node_label(expand)} repeats more than the new axis")  # Tile repeats only the new axis, twice
    last = None if shape is None else [-1, np.size(shape) - 1]  # a new last axis, however it is spelled
    if axes is None or last is None or np.size(axes) != 1 or int(np.ravel(axes)[0]) not in last or int(np.ravel(shape)[-1]) != 2:
        return Miss(f"{node_label(expand)} does not repeat each angle twice along a new last axis")
    return unsqueeze.input[0], [unsqueeze.name, expand.name, reshape.name]


class InterleavedKind(PerCallKind):
    name = "rope-interleaved"
    summary = "cos/sin recomputed per call, each frequency repeated twice in a row in the graph (Cohere)"

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | Miss:
        under = repeated_twice(graph, angle)
        found = trace_product(graph, graph.producer.get(under[0])) if under else under
        if not found:
            return found
        return found | {"nodes": found["nodes"] + under[1], "full_width": "interleaved"}
