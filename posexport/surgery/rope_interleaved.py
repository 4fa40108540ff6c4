"""Rotary cos/sin widened in the graph to interleaved pairs (Cohere: each frequency repeated twice in a
row, torch's repeat_interleave, exported as Unsqueeze(-1)─Expand(…, 2) (dynamo) or Tile(1, …, 2) (TorchScript)─Reshape):

    position_ids ─Unsqueeze(-1)─Cast─Mul(inv_freq [n])─Unsqueeze(-1)─Expand─Reshape─Cos / Sin ─▶ cos, sin

The angles are the per-call Mul form's (rope-inv-freq); the rewrite widens posexport's cos/sin the same
way (θ0, θ0, θ1, θ1, …), so the rotation downstream reads the channels it read before."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..onnxgraph.graph import Graph
from .per_call import PerCallKind, trace_product


def repeated_twice(graph: Graph, angle: str) -> tuple[str, list[str]] | None:
    """(the angles [..., n], nodes passed) under Reshape(Expand or Tile(Unsqueeze(angles, -1), [..., 2]), [..., 2n])."""
    reshape = graph.producer.get(angle)
    expand = graph.producer.get(reshape.input[0]) if reshape is not None and reshape.op_type == "Reshape" else None
    unsqueeze = graph.producer.get(expand.input[0]) if expand is not None and expand.op_type in ("Expand", "Tile") else None
    if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or len(unsqueeze.input) < 2:
        return None
    axes, shape = graph.array(unsqueeze.input[1]), graph.array(expand.input[1])
    if expand.op_type == "Tile" and (shape is None or np.any(np.ravel(shape)[:-1] != 1)):
        return None  # Tile repeats only the new axis, twice
    last = None if shape is None else [-1, np.size(shape) - 1]  # a new last axis, however it is spelled
    if axes is None or last is None or np.size(axes) != 1 or int(np.ravel(axes)[0]) not in last or int(np.ravel(shape)[-1]) != 2:
        return None
    return unsqueeze.input[0], [unsqueeze.name, expand.name, reshape.name]


class InterleavedKind(PerCallKind):
    name = "rope-interleaved"
    summary = "cos/sin recomputed per call, each frequency repeated twice in a row in the graph (Cohere)"

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | None:
        under = repeated_twice(graph, angle)
        found = trace_product(graph, graph.producer.get(under[0])) if under else None
        if found is None:
            return None
        return found | {"nodes": found["nodes"] + under[1], "full_width": "interleaved"}
