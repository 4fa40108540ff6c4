"""Rotary angles formed as a matrix product (transformers 4.x, as optimum-onnx and TorchScript export it):

    inv_freq [1, n, 1] ─Expand─Cast─┐
    position_ids ─Unsqueeze(1)─Cast─┴─MatMul─Transpose(0, 2, 1)─Concat(a, a)─Cos / Sin ─▶ cos, sin

The same positions and frequencies as the per-call Mul form (rope-inv-freq), so the check and the rewrite
are that kind's: posexport's cos/sin of position_ids replace each Cos/Sin pair, at the width it had."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..onnxgraph.graph import Graph, attribute
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


def matmul_product(graph: Graph, node: onnx.NodeProto | None) -> dict[str, Any] | None:
    """Transpose(MatMul(Expand(inv_freq [1, n, 1]), Unsqueeze(position_ids, 1))): the angles [b, s, n]."""
    if node is None or node.op_type != "Transpose" or list(attribute(node, "perm", [])) != [0, 2, 1]:
        return None
    matmul = graph.producer.get(node.input[0])
    if matmul is None or matmul.op_type != "MatMul":
        return None
    expand, freq_casts, _ = through_casts(graph, matmul.input[0])
    unsqueeze, pos_casts, float_type = through_casts(graph, matmul.input[1])
    if expand is None or expand.op_type != "Expand" or unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or float_type not in FLOAT_TYPES:
        return None
    inv_freq, axes = graph.array(expand.input[0]), graph.array(unsqueeze.input[1]) if len(unsqueeze.input) > 1 else None
    if inv_freq is None or inv_freq.ndim != 3 or inv_freq.shape[0] != 1 or inv_freq.shape[2] != 1 or axes is None or list(np.ravel(axes)) != [1]:
        return None
    nodes = [unsqueeze.name, *pos_casts, expand.name, *freq_casts, matmul.name, node.name]
    return {"inv_freq": inv_freq.reshape(-1), "freq_names": [expand.input[0]], "freq_name": expand.input[0],
            "positions": unsqueeze.input[0], "squeeze": False, "nodes": nodes, "float_type": float_type}


class MatMulKind(PerCallKind):
    name = "rope-matmul"
    summary = "cos/sin recomputed per call from inv_freq × position_ids as a MatMul (transformers 4.x, optimum-onnx)"

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | None:
        under = halves_repeated(graph, angle)
        found = matmul_product(graph, under[0]) if under else None
        if found is None:
            return None
        return found | {"nodes": found["nodes"] + under[1], "full_width": bool(under[1])}
