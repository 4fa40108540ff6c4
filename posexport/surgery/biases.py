"""ALiBi slopes (BLOOM, MPT, Falcon-RW): listed with their slopes and faults; the slopes are already exact
constants, so patch leaves them as they are."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..encodings.alibi import alibi_slopes
from ..onnxgraph.graph import Graph, node_label
from .pattern import position_source, readers
from .sites import Fault, RefusedKind, Site


def slopes_of(graph: Graph, node: onnx.NodeProto) -> tuple[np.ndarray, str] | None:
    """(slopes [heads], source) of Mul(slopes [.., heads, 1], positions), else None."""
    for const_side in (0, 1):
        value = graph.array(node.input[const_side])
        if value is None or value.size < 2 or value.shape[-1] != 1 or not np.issubdtype(value.dtype, np.floating):
            continue
        source = position_source(graph, node.input[1 - const_side])
        if source is not None:
            return value.reshape(-1).astype(np.float64), source
    return None


def shown(slopes: np.ndarray) -> str:
    """The first four slopes, as the report shows them."""
    return ", ".join(f"{s:.6g}" for s in slopes[:4]) + (" …" if len(slopes) > 4 else "")


class AlibiKind(RefusedKind):
    name = "alibi"
    summary = "ALiBi: per-head slopes times positions (BLOOM, MPT, Falcon-RW)"

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node in graph.model.graph.node:
            found = slopes_of(graph, node) if node.op_type == "Mul" and node.domain in ("", "ai.onnx") else None
            if found is None:
                continue
            slopes, source = found
            recovered = {"heads": len(slopes), "slopes": shown(slopes), "positions_from": source}
            site = Site(self.name, node_label(node), readers(graph, node), recovered)
            site.tensors["slopes"] = slopes
            sites.append(site)
        return sites

    def refusal(self, site: Site) -> str:
        return "ALiBi slopes are already exact constants; nothing to patch"

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        slopes = site.tensors["slopes"]
        standard = alibi_slopes(len(slopes))
        off = float(np.max(np.abs(slopes / standard - 1)))
        site.recovered["standard_slopes"] = off <= 1e-6
        if off > 1e-6:
            worst = int(np.argmax(np.abs(slopes / standard - 1)))
            site.recovered["standard"] = shown(standard)
            site.faults.append(Fault("alibi-slopes", f"slopes {shown(slopes)} differ from the standard geometric sequence for "
                                     f"{len(slopes)} heads, {shown(standard)}, by {off:.2e} (relative; head {worst}: "
                                     f"{slopes[worst]:.6g}, standard {standard[worst]:.6g})", off))
        else:
            site.notes.append(f"standard slopes for {len(slopes)} heads (relative error {off:.1e}); positions exact in float32 up to 2^24")
