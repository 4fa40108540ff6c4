"""What the site kinds rebuild, each with where the parameters of its check and rewrite come from: a rope's cos/sin
(the first candidate rope the site's check accepts, or the rope the site was recognised as), a learned table (grown
only when patch --extend-learned asks), and a bias rebuilt from the graph's own values (nothing to choose)."""

from __future__ import annotations

from typing import Any

from ..errors import PosexportError
from ..onnxgraph.graph import Graph
from .sites import LEFT, Fault, Rebuild, Request, Site, SiteKind
from .source import choose


class Rope(Rebuild):
    """A rope's cos/sin: the site must say how many channels it rotates (what a rope rebuild needs of it)."""

    name = "rope"

    def for_patch(self, kind: SiteKind, graph: Graph, site: Site, request: Request) -> Any:
        if not kind.patchable:
            return LEFT
        if "rotary_dim" not in site.recovered:
            kind.check(graph, site, None)  # nothing recovered to patch with: raises, naming the node
        return choose(site, request.values, request.position_limit, lambda p: kind.check(graph, site, p),
                      replace=request.replace_mismatched, rescale=True)

    def for_doctor(self, kind: SiteKind, graph: Graph, site: Site, values: Any) -> Any:
        if not kind.patchable or "rotary_dim" not in site.recovered:
            return None
        if values is None and site.recovered.get("recognised") is None:
            return None
        try:
            return choose(site, values, None, lambda p: kind.check(graph, site, p))
        except PosexportError as e:
            site.faults.append(Fault("parameters-mismatch", str(e)))
            return None


class Table(Rebuild):
    """A trained table: rewritten only when the patch is asked to grow it (its extension); else left as it is."""

    name = "table"

    def for_patch(self, kind: SiteKind, graph: Graph, site: Site, request: Request) -> Any:
        if request.extension is None:
            return LEFT
        kind.check(graph, site, request.extension)
        return request.extension


class Bias(Rebuild):
    """A bias rebuilt from the site's own values: nothing to choose."""

    name = "bias"

    def for_patch(self, kind: SiteKind, graph: Graph, site: Site, request: Request) -> Any:
        if not kind.patchable:
            return LEFT
        kind.check(graph, site, None)
        return None


ROPE, TABLE, BIAS = Rope(), Table(), Bias()
