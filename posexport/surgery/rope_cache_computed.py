"""Fused attention or rotary ops reading cos/sin caches whose rows 0 … max(position_ids) are computed in the graph on
every call (onnxscript's ``optimize_for_ort`` of a torch.onnx dynamo export of transformers 4.x's matmul rotary):

    position_ids ─ReduceMax─Add(1)─Range(0, ·, 1)─Reshape[-1, 1]─Cast─MatMul(inv_freq [1, n])─Cos / Sin ─▶ cos_cache, sin_cache

Row p is position p's cos/sin, formed from float32 angles on every call, so the site is a per-call pair, and the
rewrite is the per-call kinds': posexport's exact cos/sin of the rows' positions in place of the Cos/Sin outputs
(two-level float64 tables); the Range, the op and its attributes are left as they are. The caches have as many
rows as the call needs: no position limit of their own."""

from __future__ import annotations

from typing import Any

from ..onnxgraph.fused import reads_caches
from ..onnxgraph.graph import Graph
from .caches import rows_from, rows_product
from .pattern import Miss
from .per_call import PerCallKind
from .sites import Site


class ComputedCacheKind(PerCallKind):
    name = "rope-cache-computed"
    summary = "fused op (GroupQueryAttention, RotaryEmbedding) reading cos/sin rows 0 … max(position_ids) computed per call"

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | Miss:
        return rows_product(graph, angle)

    def match(self, graph: Graph) -> list[Site]:
        ops = [(n, spec) for n in graph.model.graph.node if (spec := reads_caches(n)) is not None]
        sites = []
        for site in super().match(graph):
            cos_outputs = {cos for cos, _ in site.tensors["pairs"]}
            fed = [n for n, spec in ops if rows_from(graph, n.input[spec[0]]) in cos_outputs]
            if fed:
                site.feeds = [n.name for n in fed]
                site.recovered |= {"op": fed[0].op_type, "cache_rows": "0 … max(position_ids), computed on every call"}
                sites.append(site)
        return sites

    def diagnose(self, graph: Graph, site: Site, p: Any, context: dict[str, Any]) -> None:
        super().diagnose(graph, site, p, context)
        site.notes.append(f"{site.recovered['op']} reads cos/sin rows 0 … max(position_ids), computed on every call: no position "
                          "limit of their own")
