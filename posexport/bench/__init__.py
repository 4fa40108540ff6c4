"""`posexport bench`: time built graphs against the memory-bound limit (a copy of the same tensor), in
one process, on any registered runtime (docs/benchmarks.md explains how to read the tables).

engine.py runs the groups (every subject of a group timed round-robin), baselines.py holds the rows beside
the backends (copy, naive tutorial export, the contrib op with a full precomputed cache,
PyTorch eager, the IndexShare block), targets.py judges the performance targets; timing.py holds the
settings, the rows and the one timing loop. Rendering lives in posexport.reports.bench.
"""

from __future__ import annotations

from .baselines import BASELINES, TutorialRotaryEmbedding, copy_model, naive_export
from .engine import check_params, config_from_options, run_bench, run_from_options
from .targets import ROPE_TARGET_SHAPE, check_targets, graph_size_note
from .timing import BenchConfig, BenchResult, Row, time_calls, time_interleaved

__all__ = [
    "BASELINES", "ROPE_TARGET_SHAPE", "BenchConfig", "BenchResult", "Row", "TutorialRotaryEmbedding", "check_params",
    "check_targets", "config_from_options", "copy_model", "graph_size_note", "naive_export", "run_bench", "run_from_options",
    "time_calls", "time_interleaved",
]
