"""Positional-encoding sites of an exported model, found the way onnxscript's rewriter finds patterns:
each site kind (a pattern, a check and a rewrite) is one class, registered in KINDS; ``find`` runs every
kind's pattern over the graph."""

from __future__ import annotations

from pathlib import Path

import onnx

from .biases import AlibiKind, LearnedTableKind, T5BiasKind
from .exact import ExactKind
from .graph import Graph, load
from .rope_cache import CacheKind
from .rope_inv_freq import InvFreqKind
from .sites import Site, SiteKind
from .unrecognised import UnrecognisedKind

# Rope kinds first: they matter most.
KINDS: dict[str, SiteKind] = {
    k.name: k for k in (InvFreqKind(), CacheKind(), LearnedTableKind(), AlibiKind(), T5BiasKind(), ExactKind(), UnrecognisedKind())
}


def find(model: onnx.ModelProto | str | Path) -> list[Site]:
    """Every positional-encoding site of ``model`` (a ModelProto or a path), in graph order."""
    graph = Graph(load(model), Path(model)) if isinstance(model, (str, Path)) else Graph(model)
    return find_in(graph)


def find_in(graph: Graph) -> list[Site]:
    sites: list[Site] = []
    for kind in KINDS.values():
        sites += kind.match(graph)
    return sites
