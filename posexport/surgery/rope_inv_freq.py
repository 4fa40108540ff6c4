"""Rotary cos/sin computed from an ``inv_freq`` initializer on every call (transformers-style exports):

    position_ids ─Unsqueeze(-1)─Cast(float)─Mul(inv_freq [n])─┬─(Concat(a, a) for full width)─Cos─(Mul factor)─▶ cos
                                                              └─────────────────────────────Sin─(Mul factor)─▶ sin

The check, the rewrite and the diagnosis are every per-call kind's (per_call.py)."""

from __future__ import annotations

from typing import Any

from ..onnxgraph.graph import Graph
from .pattern import Miss
from .per_call import PerCallKind, trace_angle


class InvFreqKind(PerCallKind):
    name = "rope-inv-freq"
    summary = "cos/sin recomputed per call from an inv_freq initializer (transformers-style export)"

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | Miss:
        return trace_angle(graph, angle)
