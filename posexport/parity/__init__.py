"""Parity: built graphs run on every runtime and judged against the float64 oracle.

engine.py runs and judges, report.py holds what a run found and its JSON codec, outputs.py the runtime
outputs one run saves and another judges. Rendering the report lives in posexport.reports.parity.
"""

from __future__ import annotations

from .engine import (
    PAIRWISE_FACTOR,
    Progress,
    Tolerance,
    bound_for,
    check_settings,
    compare,
    graph_label,
    parse_tolerance,
    resolve_runtimes,
    run_parity,
)
from .outputs import SAVED, Outputs, feeds_digest
from .report import CaseResult, Comparison, PropertyOutcome, Report, from_json, read_json, to_json

__all__ = [
    "PAIRWISE_FACTOR", "SAVED", "CaseResult", "Comparison", "Outputs", "Progress", "PropertyOutcome", "Report",
    "Tolerance", "bound_for", "check_settings", "compare", "feeds_digest", "from_json", "graph_label", "parse_tolerance",
    "read_json", "resolve_runtimes", "run_parity", "to_json",
]
