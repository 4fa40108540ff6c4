"""What every site kind shares: the Site record (where, what it feeds, what was recovered, its faults)
and the SiteKind base, whose three parts follow onnxscript's rewriter: a pattern (what it matches), a
check (why replacing it is safe) and a rewrite (what replaces it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import PosexportError
from ..onnxgraph.graph import Graph


@dataclass
class Fault:
    """A problem with numbers: ``value`` is the measured quantity the detail speaks of."""

    name: str
    detail: str
    value: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"fault": self.name, "detail": self.detail, "value": self.value}


@dataclass
class Site:
    """One positional-encoding site: where it is, what it feeds, what was recovered from it."""

    kind: str
    anchor: str  # the node the site is named after, as "OpType node 'name'"
    feeds: list[str]  # nodes that consume its result
    recovered: dict[str, Any]  # parameters read from the graph (JSON-able)
    tensors: dict[str, Any] = field(default_factory=dict)  # private: tensor names and arrays the rewrite needs
    nodes: list[str] = field(default_factory=list)  # the site's own nodes (replaced by the rewrite)
    faults: list[Fault] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "node": self.anchor,
            "feeds": self.feeds,
            "recovered": self.recovered,
            "faults": [f.as_dict() for f in self.faults],
            "notes": self.notes,
        }


class SiteKind:
    """Base of every site kind; subclasses fill in the three parts."""

    name: ClassVar[str]
    summary: ClassVar[str]
    patchable: ClassVar[bool] = True
    # What check and rewrite take: "rope" (the site's RopeParams), "extension" (patch --extend-learned;
    # only rewritten when one is given), "nothing" (the site's own values are all the rewrite needs).
    takes: ClassVar[str] = "rope"

    def match(self, graph: Graph) -> list[Site]:
        """Every site of this kind in the graph (the pattern)."""
        raise NotImplementedError

    def check(self, graph: Graph, site: Site, rope: Any) -> None:
        """Raise PosexportError naming the node when the rewrite with ``rope`` cannot be proven safe."""
        raise NotImplementedError

    def rewrite(self, graph: Graph, site: Site, rope: Any) -> None:
        """Replace the site in graph.model with posexport's exact maths for RopeParams ``rope``."""
        raise NotImplementedError

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        """Append the site's faults (with numbers) and notes; ``rope`` may be None (nothing known)."""
        raise NotImplementedError


class RefusedKind(SiteKind):
    """A kind that patch never rewrites: listed by the doctor, and an error naming the node if a patch
    would have to touch it (``patchable`` False: patch leaves it alone; True: patch refuses the model)."""

    patchable = False

    def refusal(self, site: Site) -> str:
        raise NotImplementedError

    def check(self, graph: Graph, site: Site, rope: Any) -> None:
        raise PosexportError(f"{site.anchor}: {self.refusal(site)}")

    def rewrite(self, graph: Graph, site: Site, rope: Any) -> None:
        self.check(graph, site, rope)
