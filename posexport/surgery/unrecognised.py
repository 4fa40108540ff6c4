"""Cos/Sin pairs on one angle tensor that no other kind recognises: listed so that the doctor's report
names every trig site, and refused by patch (a guess at an unknown pattern is not a fix)."""

from __future__ import annotations

from typing import Any

from ..onnxgraph.graph import Graph, node_label
from .per_call import PerCallKind
from .sites import Fault, RefusedKind, Site


class UnrecognisedKind(RefusedKind):
    name = "trig-unrecognised"
    summary = "Cos and Sin of one angle tensor, formed by a pattern posexport does not recognise"
    patchable = True  # a model holding one cannot be patched safely: patch refuses it, naming the node

    def __init__(self, known: tuple[PerCallKind, ...]):
        self.known = known  # every kind that reads per-call Cos/Sin pairs (handed in by find.py)

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node in graph.model.graph.node:
            if node.op_type != "Cos" or node.domain not in ("", "ai.onnx") or not graph.consumers_of(node.input[0], "Sin"):
                continue
            if all(kind.pair(graph, node) is None for kind in self.known):
                producer = graph.producer.get(node.input[0])
                made_by = f"{producer.op_type} node {producer.name!r}" if producer is not None else "a graph input or initializer"
                sites.append(Site(self.name, node_label(node), [c.name for c in graph.consumers.get(node.output[0], [])],
                                  {"angle": node.input[0], "angle_from": made_by}))
        return sites

    def refusal(self, site: Site) -> str:
        return f"cos/sin of {site.recovered['angle_from']} is not a pattern posexport recognises; refusing to patch it (see `posexport doctor`)"

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        site.faults.append(Fault("unrecognised", f"cos/sin of {site.recovered['angle_from']}: precision and limits not measured"))
