"""The one report model of every verdict (graph parity and whole-model parity) and its JSON codec,
which round-trips byte for byte.

Every error is normalised the same way (posexport.comparison): max|out − ref| / max(1, max|ref|), ref the
oracle. A case passes when that error is at most its bound (docs/numerics.md), so the error is also the
smallest tolerance that would have passed the case. An output the oracle cannot produce is recorded as
not compared, with the reason: it is never counted as a pass or a failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PosexportError
from ..comparison import Comparison
from ..contract import SCHEMA_VERSION
from .outputs import Outputs


@dataclass(frozen=True)
class TokenAgreement:
    """Teacher-forced next-token agreement of a model's logits with the reference's: at how many positions
    both pick the same token, and at a disagreement the reference's own top-1 − top-2 margin (in logits;
    a disagreement within the logits' error of a tie is rounding, one far from it is not)."""

    positions: int
    agreed: int
    smallest_margin: float | None = None  # over the disagreements; None when there is none
    largest_margin: float | None = None
    first_disagreement: int | None = None  # its position

    @property
    def share(self) -> float:
        return self.agreed / self.positions if self.positions else 1.0


@dataclass(frozen=True)
class Generation:
    """Greedy decoding of ``steps`` tokens after a case's prompt, the model through its own KV cache, the
    reference (transformers) following the model's tokens: the steps where the reference picks the same
    next token, the first where it would not, and the largest logits gap along the way."""

    graph: str
    case: str
    runtime: str
    steps: int  # decoded (fewer than asked when the model failed: ``message`` says how)
    agreed: int
    first_divergence: int | None = None  # the step (0: the token after the prompt); None: every step agreed
    tokens: tuple[int, int] | None = None  # (the model's, the reference's) at the first divergence
    margin: float | None = None  # the reference's top-1 − top-2 there
    largest_gap: float = 0.0  # max|out − ref| / max(1, max|ref|) over one step's logits, the largest
    gap_step: int = 0
    cache: str = ""  # how the model was run: its own KV cache, or the whole sequence each step
    message: str = ""


@dataclass(frozen=True)
class CaseResult:
    graph: str  # the subject: a built graph (encoding and dtype) or a whole model
    case: str
    runtime: str  # a runner, or "A vs B" for a pairwise comparison
    status: str  # pass | fail | error
    comparison: Comparison | None = None
    message: str = ""
    axes: Mapping[str, int] = field(default_factory=dict)
    largest_position: int | None = None
    output: str = ""  # a whole model's output (logits, a layer's key cache); "" for a graph's one output
    original: str = ""  # whole models: how the model before a patch did on the same case and output
    floor: float | None = None  # whole models: the error of transformers' own float32 forward on the same feeds
    position: int | None = None  # where the largest difference is (a token's position)
    tokens: TokenAgreement | None = None  # logits: next-token agreement with the reference
    note: str = ""  # how the output was aligned with the reference (a sliding window's last rows)


@dataclass(frozen=True)
class NotCompared:
    """An output of a subject that no oracle value exists for (or that could not be aligned with it)."""

    graph: str
    case: str
    runtime: str
    output: str
    reason: str


@dataclass(frozen=True)
class PropertyOutcome:
    graph: str
    property: str
    runtime: str
    status: str  # pass | fail | error | limitation (a failure the runtime declares as a known trap)
    detail: str
    error: float = 0.0


@dataclass
class Report:
    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)  # graph label -> manifest
    runtimes: dict[str, str] = field(default_factory=dict)  # runtime that ran -> description
    unavailable: dict[str, str] = field(default_factory=dict)  # runtime -> why it did not run
    notes: dict[str, str] = field(default_factory=dict)  # runtime -> what it computes differently in these graphs
    results: list[CaseResult] = field(default_factory=list)
    pairwise: list[CaseResult] = field(default_factory=list)
    properties: list[PropertyOutcome] = field(default_factory=list)
    not_compared: list[NotCompared] = field(default_factory=list)
    generations: list[Generation] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    # Runtime outputs, when the run kept them (--save-outputs); never part of the JSON report.
    outputs: Outputs | None = field(default=None, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        """Every case on every runtime within its bound, every pair agreeing, every property holding
        (or broken only where a runtime declares it a known limitation)."""
        return (
            bool(self.results)
            and all(r.status == "pass" for r in [*self.results, *self.pairwise])
            and all(p.status in ("pass", "limitation") for p in self.properties)
        )

    def strictly_passed(self) -> bool:
        """Passed, with every requested runtime available, every output compared and no known limitation met."""
        return self.passed and not self.unavailable and not self.not_compared and all(p.status == "pass" for p in self.properties)

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "error": 0}
        for r in [*self.results, *self.pairwise]:
            out[r.status] += 1
        return out

    def failures(self) -> list[CaseResult]:
        return [r for r in [*self.results, *self.pairwise] if r.status != "pass"]

    def to_dict(self) -> dict[str, Any]:
        data = {f: getattr(self, f) for f in ("graphs", "runtimes", "unavailable", "notes", "settings")}
        data |= {f: [asdict(r) for r in getattr(self, f)] for f in ("results", "pairwise", "properties", "not_compared", "generations")}
        return finite_json({"schema_version": SCHEMA_VERSION} | data | {"passed": self.passed})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        data = restore_json(data)

        def case(r: Mapping[str, Any]) -> CaseResult:
            c, t = r.get("comparison"), r.get("tokens")
            return CaseResult(**{**r, "comparison": Comparison(**c) if c else None, "tokens": TokenAgreement(**t) if t else None})

        def generation(g: Mapping[str, Any]) -> Generation:
            return Generation(**{**g, "tokens": tuple(g["tokens"]) if g.get("tokens") else None})

        return cls(
            graphs=dict(data["graphs"]),
            runtimes=dict(data["runtimes"]),
            unavailable=dict(data["unavailable"]),
            notes=dict(data["notes"]),
            results=[case(r) for r in data["results"]],
            pairwise=[case(r) for r in data["pairwise"]],
            properties=[PropertyOutcome(**p) for p in data["properties"]],
            not_compared=[NotCompared(**n) for n in data.get("not_compared", [])],
            generations=[generation(g) for g in data.get("generations", [])],
            settings=dict(data["settings"]),
        )


# --- JSON -------------------------------------------------------------------------------------------


def finite_json(value: Any) -> Any:
    """JSON has no inf/nan: write them as the strings "inf", "-inf", "nan" (restore_json reverses it)."""
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


NON_FINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
FLOAT_FIELDS = {"max_abs", "normalised", "p99", "bound", "error", "floor", "largest_gap", "smallest_margin", "largest_margin", "margin"}


def restore_json(value: Any, key: str = "") -> Any:
    if isinstance(value, str) and key in FLOAT_FIELDS:
        return NON_FINITE[value]
    if isinstance(value, dict):
        return {k: restore_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_json(v) for v in value]
    return value


def to_json(report: Report) -> str:
    """Strict JSON (no NaN or Infinity literals), keys sorted: the same report gives the same text."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"


def from_json(text: str) -> Report:
    return Report.from_dict(json.loads(text))


def read_json(path: str | Path) -> Report:
    try:
        return from_json(Path(path).read_text())
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PosexportError(f"{path}: not a posexport parity JSON report ({e})") from None
