"""Fused attention or rotary ops reading cos/sin "caches" computed in the graph, one row per token
(transformers 5's exporter with onnxruntime fusions: GroupQueryAttention for "cpu", com.microsoft
RotaryEmbedding for "cuda"):

    position_ids ─…─Cos / Sin [b, s, n] (a per-call pair) ─Reshape [b·s, n]─Concat(…, zero rows)─▶ cos_cache
    Range(0, b·s, 1) ─Reshape─▶ the op's position_ids (row i for token i)

The rows are the per-call Cos/Sin of the token's own position, so the site is that per-call pair (any of
the per-call kinds) and the rewrite is theirs: posexport's exact cos/sin of position_ids in place of the
Cos/Sin outputs; the Reshape, the padding and the fused op are left as they are."""

from __future__ import annotations

from typing import Any

import onnx

from ..onnxgraph.fused import reads_caches
from ..onnxgraph.graph import Graph
from .caches import rows_from, token_rows
from .per_call import PerCallKind
from .sites import Site


class PerTokenCacheKind(PerCallKind):
    """The per-call kinds' sites whose Cos/Sin feed a fused op's caches row by row; those kinds are handed in (find.py),
    so that this kind imports none of them."""

    name = "rope-cache-per-token"
    summary = "fused op (GroupQueryAttention, RotaryEmbedding) reading cos/sin rows computed per token in the graph"

    def __init__(self, per_call: tuple[PerCallKind, ...]):
        self.per_call = per_call

    def match(self, graph: Graph) -> list[Site]:
        ops = [(n, spec) for n in graph.model.graph.node if (spec := reads_caches(n)) is not None]
        sites = []
        for kind in self.per_call:
            for site in kind.match(graph):
                cos_outputs = {cos for cos, _ in site.tensors["pairs"]}
                fed = [n for n, spec in ops if rows_from(graph, n.input[spec[0]]) in cos_outputs and token_rows(graph, n)]
                if fed:
                    sites.append(self.relabel(site, kind.name, fed))
        return sites

    def relabel(self, site: Site, per_call: str, fed: list[onnx.NodeProto]) -> Site:
        site.kind = self.name
        site.feeds = [n.name for n in fed]
        site.recovered |= {"op": fed[0].op_type, "per_call_form": per_call, "cache_rows": "one per token (the op's position_ids are 0 … b·s−1)"}
        return site

    def diagnose(self, graph: Graph, site: Site, p: Any, context: dict[str, Any]) -> None:
        super().diagnose(graph, site, p, context)
        site.notes.append(f"{site.recovered['op']} reads these cos/sin row by row, one row per token: no position limit of its own")
