"""The performance targets (docs/benchmarks.md), judged on the rows that match their conditions
(onnxruntime CPU, float32), and the graph-size comparison the Markdown report closes with."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import export
from .timing import Row

ROPE_TARGET_SHAPE = [1, 2048, 32, 128]


def timed_rows(rows: list[Row], encoding: str) -> list[Row]:
    return [r for r in rows if r.encoding == encoding and r.runtime == "ort-cpu" and r.dtype == "float32" and np.isfinite(r.median_ms)]


def find(rows: list[Row], encoding: str, subject_prefix: str, shape: list[int]) -> Row | None:
    return next((r for r in timed_rows(rows, encoding) if r.subject.startswith(subject_prefix) and r.shape == shape), None)


def verdict(name: str, value: float, limit: float, row: Row, higher_is_better: bool = False) -> dict[str, Any]:
    met = value >= limit if higher_is_better else value <= limit
    miss = "" if met else f"missed by {abs(value / limit - 1) * 100:.0f}%"
    profile = ", ".join(f"{op} {share:.0%}" for op, share in row.profile)
    return {"target": name, "measured": round(value, 3), "limit": limit, "met": bool(met), "miss": miss,
            "subject": row.subject, "profile": profile}


def check_targets(rows: list[Row]) -> list[dict[str, Any]]:
    """rope at [1, 2048, 32, 128]: auto ≤ 1.15× copy, portable ≤ 4× copy and ≥ 1.5× faster than the naive
    export; alibi and t5 (portable) ≤ 1.5× writing their output once, at every length timed."""
    out: list[dict[str, Any]] = []
    auto, portable, naive = (find(rows, "rope", s, ROPE_TARGET_SHAPE) for s in ("auto", "portable", "naive-export"))
    if auto:
        out.append(verdict(f"rope {auto.subject} ≤ 1.15× copy", auto.ratio_to_copy, 1.15, auto))
    if portable:
        out.append(verdict("rope portable ≤ 4× copy", portable.ratio_to_copy, 4.0, portable))
        if naive:
            out.append(verdict("rope portable ≥ 1.5× faster than naive export", naive.median_ms / portable.median_ms, 1.5, portable,
                               higher_is_better=True))
    for enc in ("alibi", "t5"):
        for r in timed_rows(rows, enc):
            if r.subject == "portable":
                out.append(verdict(f"{enc} seq {r.seq} ≤ 1.5× writing its output once (copy)", r.ratio_to_copy, 1.5, r))
    return out


def graph_size_note() -> str:
    """Bytes of the 131072-position LLaMA-3.1 rope graph against one cos/sin table of every position."""
    params: dict[str, Any] = {"head_dim": 128, "heads": 32, "base": 500000.0, "max_positions": 131072, "position_limit": 131072,
                              "scaling": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_positions": 8192}
    art = export.build("rope", params, backend="portable")
    n = art.params.rotary_dim // 2
    single = 2 * art.params.position_limit * n * 4
    fine, coarse = art.manifest["tables"]["fine_cos"][0], art.manifest["tables"]["coarse_cos"][0]
    return (f"LLaMA-3.1 rope graph ({', '.join(f'{k}={v}' for k, v in params.items())}), float32: "
            f"{art.manifest['bytes']:,} bytes ({art.manifest['bytes'] / 2**20:.2f} MiB) with two-level tables of "
            f"{fine} + {coarse} rows; one cos table and one sin table of {art.params.position_limit} rows would weigh "
            f"{single:,} bytes ({single / 2**20:.0f} MiB).")
