"""What every site kind shares: the Site record (where, what it feeds, what was recovered, its faults) and the
SiteKind base, whose three parts follow onnxscript's rewriter: a pattern (what it matches), a check (why replacing
it is safe) and a rewrite (what replaces it); and what a kind rebuilds (Rebuild: a rope's cos/sin, a learned table,
a bias, or nothing), which says where the parameters of its check and rewrite come from."""

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


class Mismatch(PosexportError):
    """A check's refusal because the parameters asked for are not those the graph holds (its frequencies or attention
    factor), while the site could be rebuilt to them: patch --replace-mismatched does, and a scaling added to the
    rope the graph holds is a rescale (a context extension)."""


REPLACE_FLAG = "--replace-mismatched"


@dataclass(frozen=True)
class Request:
    """What a patch is asked for: rope options (one rope's, several candidates, or None: each site's own), a position
    limit, the extension of learned tables (patch --extend-learned), and whether a site whose parameters disagree
    with the options is rebuilt to them (patch --replace-mismatched)."""

    values: Any = None
    position_limit: int | None = None
    extension: Any = None
    replace_mismatched: bool = False


class Rebuild:
    """What a kind rebuilds (a rope's cos/sin, a learned table, a bias, or nothing patch may touch) and where the
    parameters of its check and rewrite come from; patch and doctor ask it (surgery/rebuilds.py holds them)."""

    name: ClassVar[str]

    def for_patch(self, kind: SiteKind, graph: Graph, site: Site, request: Request) -> Any:
        """The parameters the kind's check accepted for rewriting ``site`` (LEFT: patch leaves it as it is); an error
        naming the node when the model cannot be patched safely."""
        raise NotImplementedError

    def for_doctor(self, kind: SiteKind, graph: Graph, site: Site, values: Any) -> Any:
        """The parameters the site's faults are measured against (None: nothing known; a mismatch is the site's fault)."""
        return None


LEFT = object()  # Rebuild.for_patch: the site stays as it is


class SiteKind:
    """Base of every site kind; subclasses fill in the pattern, the check and the rewrite, and say what they rebuild
    (``rebuilds``: the parameters those two take come from it)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    patchable: ClassVar[bool] = True
    rebuilds: ClassVar[Rebuild]

    def match(self, graph: Graph) -> list[Site]:
        """Every site of this kind in the graph (the pattern)."""
        raise NotImplementedError

    def check(self, graph: Graph, site: Site, params: Any) -> None:
        """Raise PosexportError naming the node when the rewrite with ``params`` cannot be proven safe."""
        raise NotImplementedError

    def rewrite(self, graph: Graph, site: Site, params: Any) -> None:
        """Replace the site in graph.model with posexport's exact maths for ``params`` (what the kind rebuilds)."""
        raise NotImplementedError

    def diagnose(self, graph: Graph, site: Site, params: Any, context: dict[str, Any]) -> None:
        """Append the site's faults (with numbers) and notes; ``params`` may be None (nothing known)."""
        raise NotImplementedError


class Refused(Rebuild):
    """Nothing patch may rewrite: the site is left as it is, or (a kind whose site makes the model unsafe to patch)
    refused, naming the node."""

    name = "nothing"

    def for_patch(self, kind: SiteKind, graph: Graph, site: Site, request: Request) -> Any:
        if not kind.patchable:
            return LEFT
        kind.check(graph, site, None)  # raises, naming the node


class RefusedKind(SiteKind):
    """A kind that patch never rewrites: listed by the doctor, and an error naming the node if a patch
    would have to touch it (``patchable`` False: patch leaves it alone; True: patch refuses the model)."""

    patchable = False
    rebuilds = Refused()

    def refusal(self, site: Site) -> str:
        raise NotImplementedError

    def check(self, graph: Graph, site: Site, params: Any) -> None:
        raise PosexportError(f"{site.anchor}: {self.refusal(site)}")

    def rewrite(self, graph: Graph, site: Site, params: Any) -> None:
        self.check(graph, site, params)
