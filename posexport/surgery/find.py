"""Positional-encoding sites of an exported model, found the way onnxscript's rewriter finds patterns:
each site kind (a pattern, a check and a rewrite) is one class, registered in KINDS; ``find`` runs every
kind's pattern over the graph."""

from __future__ import annotations

from pathlib import Path

import onnx

from ..onnxgraph.graph import Graph, load
from .biases import AlibiKind
from .exact import ExactKind
from .grid_resample import GridResampleKind
from .learned_table import LearnedTableKind
from .rope_cache import CacheKind
from .rope_cache_computed import ComputedCacheKind
from .rope_cache_gathered import GatheredCacheKind
from .rope_interleaved import InterleavedKind
from .rope_inv_freq import InvFreqKind
from .rope_matmul import MatMulKind
from .rope_per_token import PerTokenCacheKind
from .sincos_table import SinCosTableKind
from .sites import Site, SiteKind
from .t5_bias import T5BiasKind
from .unrecognised import UnrecognisedKind

# The kinds that read per-call Cos/Sin pairs: the per-token caches and the unrecognised pairs are judged by them.
PER_CALL = (InvFreqKind(), MatMulKind(), InterleavedKind(), ComputedCacheKind())
# Rope kinds first: they matter most. The per-token caches are a per-call Cos/Sin pair that feeds a fused
# op: that kind comes first and the per-call kinds' site at the same node is not listed twice.
KINDS: dict[str, SiteKind] = {
    k.name: k for k in (PerTokenCacheKind(PER_CALL), *PER_CALL, CacheKind(), GatheredCacheKind(), SinCosTableKind(),
                        LearnedTableKind(), AlibiKind(), T5BiasKind(), GridResampleKind(), ExactKind(), UnrecognisedKind(PER_CALL))
}


def find(model: onnx.ModelProto | str | Path) -> list[Site]:
    """Every positional-encoding site of ``model`` (a ModelProto or a path), in graph order."""
    graph = Graph(load(model), Path(model)) if isinstance(model, (str, Path)) else Graph(model)
    return find_in(graph)


def find_in(graph: Graph) -> list[Site]:
    sites: list[Site] = []
    for kind in KINDS.values():
        sites += [s for s in kind.match(graph) if all(s.anchor != t.anchor for t in sites)]
    return sites
