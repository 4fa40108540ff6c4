"""Verdicts: one run-and-compare layer for built graphs and whole models.

Runners are the runtimes of posexport.runtimes (one registry, one name each: torch, reference, ort-cpu,
ort-cpu-noopt, ort-cuda, openvino, and hf for a model's own position code) and the oracles: the float64
reference of a graph's parameters, and the transformers model in float64 (hf_oracle, `hf-float64`).
Comparators are posexport.comparison's one error formula. graphs.py sweeps built graphs (and checks their
properties on graph runners only), models.py compares whole models output by output, report.py is the one
report model both fill (rendered by posexport.reports.parity), outputs.py the outputs one run saves and
another judges. Whole models are fed real text where a tokenizer is found (tokens.py), compared block by
block as their outputs arrive (streamed.py), and decoded greedily against transformers (generate.py).
"""

from __future__ import annotations

from ..comparison import PAIRWISE_FACTOR, Comparison, compare, normalised_error
from .graphs import (
    Progress,
    Tolerance,
    bound_for,
    check_settings,
    graph_label,
    parse_tolerance,
    resolve_runtimes,
    run_parity,
)
from .hf_oracle import HfOracle, cache_slot
from .model_feeds import FeedCase, Signature, make_feeds, signature
from .models import DEFAULT_RUNTIMES, FLOOR_FACTOR, TOLERANCE, model_parity
from .outputs import SAVED, Outputs, feeds_digest
from .report import CaseResult, Generation, NotCompared, PropertyOutcome, Report, TokenAgreement, from_json, read_json, to_json
from .tokens import Tokens, token_source

__all__ = [
    "DEFAULT_RUNTIMES", "FLOOR_FACTOR", "PAIRWISE_FACTOR", "SAVED", "TOLERANCE", "CaseResult", "Comparison", "FeedCase",
    "Generation", "HfOracle", "NotCompared", "Outputs", "Progress", "PropertyOutcome", "Report", "Signature", "TokenAgreement",
    "Tokens", "Tolerance", "bound_for", "cache_slot", "check_settings", "compare", "feeds_digest", "from_json", "graph_label",
    "make_feeds", "model_parity", "normalised_error", "parse_tolerance", "read_json", "resolve_runtimes", "run_parity",
    "signature", "to_json", "token_source",
]
