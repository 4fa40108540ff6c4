"""Fused rotary ops that read cos/sin caches [rows, rotary_dim/2] held as constants (or LongRoPE's If between two
such pairs): com.microsoft GroupQueryAttention (do_rotary=1, onnxruntime-genai's builder), com.microsoft and ONNX
RotaryEmbedding. Every op reading the same pair of caches is one site. Caches computed per token in the graph (one
row per token, read through a Range of position ids) are the rope-cache-per-token kind's, rows 0 … max(position_ids)
computed on every call the rope-cache-computed kind's; rows gathered by position
from constant caches before the op (mobius-onnx) are the rope-cache-gathered kind's. The check, the rewrite and the
diagnosis are every cache kind's (caches.py)."""

from __future__ import annotations

import onnx

from ..onnxgraph.graph import Graph
from .caches import CacheSites, computed_rows, gathered, per_token


class CacheKind(CacheSites):
    name = "rope-cache"
    summary = "fused rotary op reading cos/sin caches (GroupQueryAttention, RotaryEmbedding)"

    def claims(self, graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str]) -> bool:
        """Constant caches: neither rows computed per token or per call nor rows gathered by position."""
        return not per_token(graph, node, spec) and gathered(graph, node, spec) is None and not computed_rows(graph, node, spec)
