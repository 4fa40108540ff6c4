"""Sites posexport already wrote: calls into the posexport domain (exact float64 tables). Reported so
that every site is listed; nothing to patch and no faults."""

from __future__ import annotations

from typing import Any

from ..contract import DOMAIN
from ..onnxgraph.graph import Graph, node_label
from .sites import RefusedKind, Site


class ExactKind(RefusedKind):
    name = "posexport"
    summary = "posexport cos/sin or rotation (exact float64 tables)"

    def match(self, graph: Graph) -> list[Site]:
        return [
            Site(self.name, node_label(n), [c.name for o in n.output for c in graph.consumers.get(o, [])],
                 {"function": n.op_type, "tables": [i for i in n.input[1:] if i in graph.initializers]})
            for n in graph.model.graph.node if n.domain == DOMAIN
        ]

    def refusal(self, site: Site) -> str:
        return "already posexport's exact maths"

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        if site.recovered["function"].startswith("T5PositionBias"):
            site.notes.append("T5 bias read from the table's rows by clamped relative position: the same at every length")
        else:
            site.notes.append("exact float64 tables; positions past the graph's limit raise")
