"""Rotary angles formed as a matrix product (transformers 4.x, as optimum-onnx and TorchScript export it):

    inv_freq [1, n, 1] ─Expand─Cast─┐
    position_ids ─Unsqueeze(1)─Cast─┴─MatMul─Transpose(0, 2, 1)─Concat(a, a)─Cos / Sin ─▶ cos, sin

The same positions and frequencies as the per-call Mul form (rope-inv-freq), so the check and the rewrite
are that kind's: posexport's cos/sin of position_ids replace each Cos/Sin pair, at the width it had."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..onnxgraph.graph import Graph, attribute, node_label
from .pattern import Miss, up
from .per_call import FLOAT_TYPES, PerCallKind, halves_repeated


def through_casts(graph: Graph, name: str) -> tuple[onnx.NodeProto | None, list[str], int | None]:
    """(the first non-Cast producer above ``name``, the Casts passed, the float type the last Cast gave)."""
    passed, to = [], None
    node = graph.producer.get(name)
    while node is not None and node.op_type == "Cast":
        to = to if to is not None else int(attribute(node, "to", 0))
        passed.append(node.name)
        node = graph.producer.get(node.input[0])
    return node, passed, to


def matmul_product(graph: Graph, angle: str) -> dict[str, Any] | Miss:
    """Transpose(MatMul(Expand(inv_freq [1, n, 1]), Unsqueeze(position_ids, 1))): the angles [b, s, n]."""
    node = up(graph, angle, "Transpose")
    if node and list(attribute(node, "perm", [])) != [0, 2, 1]:
        return Miss(f"{node_label(node)} does not swap the last two axes")
    matmul = up(graph, node.input[0], "MatMul") if node else node
    if not matmul:
        return matmul
    expand, freq_casts, _ = through_casts(graph, matmul.input[0])
    unsqueeze, pos_casts, float_type = through_casts(graph, matmul.input[1])
    if expand is None or expand.op_type != "Expand" or unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or float_type not in FLOAT_TYPES:
        return Miss(f"{node_label(matmul)} does not multiply Expand(inv_freq) by positions unsqueezed and cast to a float")
    inv_freq, axes = graph.array(expand.input[0]), graph.array(unsqueeze.input[1]) if len(unsqueeze.input) > 1 else None
    if inv_freq is None or inv_freq.ndim != 3 or inv_freq.shape[0] != 1 or inv_freq.shape[2] != 1 or axes is None or list(np.ravel(axes)) != [1]:
        return Miss(f"{node_label(matmul)}'s frequencies are not a stored [1, n, 1] tensor before positions unsqueezed at axis 1")
    nodes = [unsqueeze.name, *pos_casts, expand.name, *freq_casts, matmul.name, node.name]
    return {"inv_freq": inv_freq.reshape(-1), "freq_names": [expand.input[0]], "freq_name": expand.input[0],
            "positions": unsqueeze.input[0], "squeeze": False, "nodes": nodes, "float_type": float_type}


class MatMulKind(PerCallKind):
    name = "rope-matmul"
    summary = "cos/sin recomputed per call from inv_freq × position_ids as a MatMul (transformers 4.x, optimum-onnx)"

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | Miss:
        under = halves_repeated(graph, angle)
        found = matmul_product(graph, under[0]) if under else under
        if not found:
            return found
        return found | {"nodes": found["nodes"] + under[1], "full_width": bool(under[1])}
