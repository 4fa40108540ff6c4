"""Fused rotary ops that read cos/sin caches [rows, rotary_dim/2] (com.microsoft GroupQueryAttention with
do_rotary=1, onnxruntime-genai's builder; com.microsoft and ONNX RotaryEmbedding), as the cache kinds find them: where
a cache's rows come from, the caches stored (constant initializers, or, for LongRoPE, If(total length > L0) choosing a
long pair over a short one), the position limits a patch chose, and CacheSites, what every cache kind does with its
caches once its pattern has claimed them.

The caches bound the positions (GroupQueryAttention raises once total_sequence_length exceeds their rows) and are
usually computed with float32 angles. The rewrite rebuilds every cache from float64 angles (the long or only pair up
to the position limit, the short pair at its own rows), in the caches' own float type; the ops, their attributes and
every other tensor stay as they are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper as onh

from .. import params as params_mod
from ..contract import DOMAIN
from ..errors import PosexportError
from ..onnxgraph.fused import reads_caches
from ..onnxgraph.graph import Graph, attribute, node_label, values, whole_length
from ..rope import encoding as rope
from ..rope.scaling import DYNAMIC, REGIMES, SCALINGS, decided_per_call, source_of, switch_length
from .freqs import (LOW_PRECISION, PRECISION_FAULT, PROJECTED, cache_error, close_to_cache, describe, dynamic_gaps, exact_from, from_cache,
                    low_precision_error, recognise, rounding_bound)
from .pattern import Miss, through, up
from .rebuilds import ROPE
from .recorded import chosen_limits, record_limit
from .sites import Fault, Mismatch, Site, SiteKind

# What a runtime does once positions reach the cache's rows.
PAST_LIMIT = {
    "GroupQueryAttention": "onnxruntime raises (cos_cache dimension 0 shall not be less than total_sequence_length)",
    "RotaryEmbedding": "onnxruntime raises (position_ids value … is out of range [0, rows); a longer prompt: Updating cos_cache "
                       "and sin_cache in RotaryEmbedding is not currently supported)",
}
FLOATS = ("float16", "bfloat16", "float32", "float64")  # by name: numpy has no bfloat16 (ml_dtypes gives it)


PASSED = ("Reshape", "Cast", "Squeeze", "Unsqueeze", "Identity")
# the fused op's input that says which cache row each token reads
POSITION_IDS = {("com.microsoft", "GroupQueryAttention"): 9, ("com.microsoft", "RotaryEmbedding"): 1, ("", "RotaryEmbedding"): 3}


def rows_from(graph: Graph, cache: str) -> str | None:
    """The tensor a cache's rows come from, under Reshape/Cast/Squeeze/Unsqueeze and a Concat on axis 0
    whose later inputs are padding (Expand of a constant)."""
    node = graph.producer.get(cache)
    while node is not None and node.op_type in PASSED + ("Concat",):
        if node.op_type == "Concat":
            padding = [graph.producer.get(i) for i in node.input[1:]]
            if onnx.helper.get_attribute_value(node.attribute[0]) != 0 or any(
                    p is None or p.op_type != "Expand" or graph.array(p.input[0]) is None for p in padding):
                return None
        cache = node.input[0]
        node = graph.producer.get(cache)
    return cache


def token_rows(graph: Graph, node: onnx.NodeProto) -> bool:
    """The op reads cache row i for token i: its position_ids are Range(0, …, 1), reshaped, or that range
    folded to a constant 0 … n−1 where batch and sequence are fixed (a one-token decode step's [[0]])."""
    index = POSITION_IDS.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
    if index is None or len(node.input) <= index or not node.input[index]:
        return False
    folded = graph.array(node.input[index])
    if folded is not None:
        return folded.size > 0 and np.array_equal(folded.ravel(), np.arange(folded.size))
    _, source = through(graph, node.input[index], PASSED)
    if source is None or source.op_type != "Range":
        return False
    start, delta = graph.array(source.input[0]), graph.array(source.input[2])
    return start is not None and delta is not None and np.all(start == 0) and np.all(delta == 1)


def per_token(graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str]) -> bool:
    """The op's caches are rows computed per token in the graph (the rope-cache-per-token kind's)."""
    rows = rows_from(graph, node.input[spec[0]])
    return rows is not None and graph.array(rows) is None and token_rows(graph, node)


def rows_product(graph: Graph, angle: str) -> dict[str, Any] | Miss:
    """MatMul(Cast(Reshape(Range(0, n, 1), [-1, 1])), inv_freq [1, m]): the angles of cache rows 0 … n−1 formed in the
    graph on every call (onnxscript's optimize_for_ort fuses transformers 4.x's matmul rotary so, n = max(position_ids) + 1)."""
    matmul = up(graph, angle, "MatMul")
    cast = up(graph, matmul.input[0], "Cast") if matmul else matmul
    reshape = up(graph, cast.input[0], "Reshape") if cast else cast
    rows = up(graph, reshape.input[0], "Range") if reshape else reshape
    if not rows:
        return rows
    inv_freq, shape = graph.array(matmul.input[1]), graph.array(reshape.input[1])
    start, delta = graph.array(rows.input[0]), graph.array(rows.input[2])
    if inv_freq is None or inv_freq.ndim != 2 or inv_freq.shape[0] != 1 or shape is None or list(shape.ravel()) != [-1, 1]:
        return Miss(f"{node_label(matmul)} does not multiply a column of rows by a stored [1, n] row of frequencies")
    if start is None or delta is None or start.size != 1 or delta.size != 1 or int(start.ravel()[0]) != 0 or int(delta.ravel()[0]) != 1:
        return Miss(f"{node_label(rows)} does not count rows 0, 1, 2 …")
    return {"inv_freq": inv_freq.reshape(-1), "freq_names": [matmul.input[1]], "freq_name": matmul.input[1],
            "positions": reshape.output[0], "squeeze": True, "nodes": [cast.name, matmul.name],
            "float_type": int(attribute(cast, "to", 0)), "full_width": False}


def computed_rows(graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str]) -> bool:
    """The op's caches are Cos/Sin of ``rows_product`` (the rope-cache-computed kind's), or, once patched, posexport's
    cos/sin of those rows (the posexport kind's)."""
    rows = rows_from(graph, node.input[spec[0]])
    made = graph.producer.get(rows) if rows is not None else None
    if made is not None and made.domain == DOMAIN:
        return True
    return made is not None and made.op_type == "Cos" and bool(rows_product(graph, made.input[0]))


def gathered_from(graph: Graph, cache: str) -> onnx.NodeProto | Miss:
    """The Gather (axis 0) of a stored 2-D float table that a cache input's rows are, under
    Reshape/Cast/Squeeze/Unsqueeze: the rope-cache-gathered kind's caches."""
    rows, _ = through(graph, cache, PASSED)
    node = up(graph, rows, "Gather")
    if node and (node.domain not in ("", "ai.onnx") or attribute(node, "axis", 0) != 0):
        return Miss(f"{node_label(node)} gathers along axis {attribute(node, 'axis', 0)} (or in domain {node.domain!r}), not rows")
    table = graph.initializers.get(node.input[0]) if node else None
    if node and (table is None or len(table.dims) != 2 or table.data_type not in (1, 10, 11, 16)):
        return Miss(f"{node_label(node)} gathers from {node.input[0]}, not a stored 2-D float table")
    return node


def gathered(graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str]) -> tuple[onnx.NodeProto, onnx.NodeProto] | None:
    """The (cos, sin) Gathers an op's caches are, when both are rows gathered from stored tables."""
    cos, sin = gathered_from(graph, node.input[spec[0]]), gathered_from(graph, node.input[spec[1]])
    return (cos, sin) if cos and sin else None


def cache_gathers(graph: Graph) -> set[str]:
    """Names of the Gathers whose rows a fused rotary op reads as its cos/sin caches."""
    return {g.name for n in graph.model.graph.node if (spec := reads_caches(n)) is not None for g in gathered(graph, n, spec) or ()}


@dataclass
class CachePair:
    """One cos/sin cache pair and how to write a replacement where it is stored."""

    cos: np.ndarray
    sin: np.ndarray
    write: Callable[[np.ndarray, np.ndarray], None]


def stored(graph: Graph, cos: str, sin: str) -> CachePair | None:
    """Caches held as initializers."""
    if cos not in graph.initializers or sin not in graph.initializers:
        return None

    def write(new_cos: np.ndarray, new_sin: np.ndarray) -> None:
        graph.initializers[cos].CopyFrom(onh.from_array(new_cos, cos))
        graph.initializers[sin].CopyFrom(onh.from_array(new_sin, sin))

    return CachePair(graph.array(cos), graph.array(sin), write)


def branch_pair(branch: onnx.GraphProto, cos_index: int, sin_index: int) -> CachePair | None:
    """The Constant cos/sin an If branch returns at these output positions."""
    producers = {o: n for n in branch.node for o in n.output}
    if len(branch.output) <= max(cos_index, sin_index):
        return None
    nodes = [producers.get(branch.output[i].name) for i in (cos_index, sin_index)]
    if any(n is None or n.op_type != "Constant" or [a.name for a in n.attribute] != ["value"] for n in nodes):
        return None
    tensors = [n.attribute[0].t for n in nodes]

    def write(new_cos: np.ndarray, new_sin: np.ndarray) -> None:
        for tensor, value in zip(tensors, (new_cos, new_sin)):
            tensor.CopyFrom(onh.from_array(value, tensor.name))

    return CachePair(values(tensors[0]), values(tensors[1]), write)


def switched(graph: Graph, cos: str, sin: str) -> tuple[list[CachePair], int] | None:
    """([short, long], L0) of If(Greater(total length, L0)) returning a long pair, else a short one."""
    node = graph.producer.get(cos)
    if node is None or node.op_type != "If" or graph.producer.get(sin) is not node:
        return None
    greater = graph.producer.get(node.input[0])
    switch = graph.array(greater.input[1]) if greater is not None and greater.op_type == "Greater" else None
    branches = {a.name: a.g for a in node.attribute}
    indexes = list(node.output).index(cos), list(node.output).index(sin)
    pairs = [branch_pair(branches[b], *indexes) for b in ("else_branch", "then_branch") if b in branches]
    length = whole_length(switch)
    if length is None or len(pairs) != 2 or None in pairs:
        return None
    return pairs, length


def read_caches(graph: Graph, cos: str, sin: str) -> tuple[list[CachePair], int | None] | None:
    """The cache pairs an op reads (one, or LongRoPE's short and long) and the switch length, or None."""
    single = stored(graph, cos, sin)
    if single is not None:
        return [single], None
    return switched(graph, cos, sin)


def describe_pairs(pairs: list[CachePair], switch: int | None) -> dict[str, Any]:
    """What the caches give back: rows, width, float type, frequencies and attention factor (per regime)."""
    inv_freq, factor = from_cache(pairs[0].cos, pairs[0].sin)
    out: dict[str, Any] = {
        "rows": int(pairs[-1].cos.shape[0]), "rotary_dim": 2 * int(pairs[0].cos.shape[1]), "dtype": str(pairs[0].cos.dtype),
        "inv_freq": describe(inv_freq), "attention_factor": round(factor, 7),
        "recognised": recognise(inv_freq) if switch is None else None,
    }
    if switch is not None:
        long_freq, long_factor = from_cache(pairs[1].cos, pairs[1].sin)
        out |= {"regime_switch": switch, "short_rows": int(pairs[0].cos.shape[0]), "long_inv_freq": describe(long_freq),
                "long_attention_factor": round(long_factor, 7)}
    return out


def regimes(p: rope.RopeParams, switch: int | None) -> list[tuple[np.ndarray, float]]:
    """(inv_freq, attention factor) the parameters give each cache pair: short then long for LongRoPE."""
    if switch is None:
        return [rope.inv_freq_and_factor(p)]
    return [rope.inv_freq_and_factor(p, switch), rope.inv_freq_and_factor(p, switch + 1)]


def dynamic_rope(ropes: list[dict[str, Any]], width: int) -> rope.RopeParams | None:
    """The config's dynamic-NTK rope at the caches' width (the parameters a fixed pair is measured against)."""
    for values in ropes:
        if values.get("scaling") == "dynamic":
            try:
                return params_mod.build(rope.RopeParams, values | {"head_dim": width, "rotary_dim": width})
            except PosexportError:
                continue
    return None


class CacheSites(SiteKind):
    """A kind whose sites are the cos/sin caches fused ops read; which caches are its own is ``claims``."""

    rebuilds = ROPE

    def match(self, graph: Graph) -> list[Site]:
        sites: dict[tuple[str, str], Site] = {}
        for node in graph.model.graph.node:
            spec = reads_caches(node)
            if spec is None or not self.claims(graph, node, spec):
                continue
            key = (node.input[spec[0]], node.input[spec[1]])
            if key not in sites:
                sites[key] = self.new_site(graph, node, spec, key)
            sites[key].feeds.append(node.name)
        return list(sites.values())

    def claims(self, graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str]) -> bool:
        """Whether the op's caches are this kind's (the kind's pattern)."""
        raise NotImplementedError

    def new_site(self, graph: Graph, node: onnx.NodeProto, spec: tuple[int, int, str], key: tuple[str, str]) -> Site:
        site = self.site_at(node, spec, key)
        missing = "computed in the graph (neither constant [rows, n] caches nor an If between two such pairs)"
        return self.read_back(site, read_caches(graph, *key), missing)

    def site_at(self, node: onnx.NodeProto, spec: tuple[int, int, str], key: tuple[str, str]) -> Site:
        interleaved = bool(attribute(node, spec[2], 0))
        recovered: dict[str, Any] = {"op": node.op_type, "cos_cache": key[0], "sin_cache": key[1],
                                     "pair_layout": "interleaved" if interleaved else "half"}
        return Site(self.name, node_label(node), [], recovered, {"cos": key[0]})

    @staticmethod
    def read_back(site: Site, found: tuple[list[CachePair], int | None] | None, missing: str) -> Site:
        """The site with what its caches give back, or with why they cannot be read (``missing`` when
        there are none)."""
        recovered = site.recovered
        if found is None or any(c.cos.ndim != 2 or c.cos.shape != c.sin.shape for c in found[0]):
            recovered["caches"] = missing
            return site
        if any(0 in c.cos.shape or str(c.cos.dtype) not in FLOATS or c.sin.dtype != c.cos.dtype for c in found[0]):
            shapes = ", ".join(f"{list(c.cos.shape)} {c.cos.dtype}/{c.sin.dtype}" for c in found[0])
            recovered["caches"] = f"constant but empty or not floats ({shapes})"
            return site
        site.tensors |= {"pairs": found[0], "switch": found[1]}
        recovered |= describe_pairs(*found)
        return site

    def check(self, graph: Graph, site: Site, p: rope.RopeParams) -> None:
        if "pairs" not in site.tensors:
            raise PosexportError(f"{site.anchor}: its cos/sin caches are {site.recovered['caches']}; posexport cannot rebuild them")
        switch = site.tensors["switch"]
        if (switch is not None) != (source_of(p) == REGIMES) or source_of(p) == DYNAMIC:
            what = f"switch to a long pair past length {switch} (LongRoPE)" if switch is not None else "are one fixed pair"
            raise PosexportError(f"{site.anchor}: the caches {what}, which cannot follow the {p.scaling} scaling; refusing to guess")
        if switch is not None and switch != switch_length(p):
            raise PosexportError(f"{site.anchor}: the caches switch past length {switch}, the parameters at {switch_length(p)}")
        for pair, (inv_freq, factor) in zip(site.tensors["pairs"], regimes(p, switch)):
            got, got_factor = from_cache(pair.cos, pair.sin)
            factor_slack = 1e-4 * factor + 4 * float(np.finfo(pair.cos.dtype).eps)
            if not close_to_cache(got, inv_freq, pair.cos) or abs(got_factor - factor) > factor_slack:
                raise Mismatch(
                    f"{site.anchor}: the caches hold frequencies {describe(got)} (factor {got_factor:g}), not those of the "
                    f"{p.scaling} rope asked for ({describe(inv_freq)}, factor {factor:g})"
                )

    def rewrite(self, graph: Graph, site: Site, p: rope.RopeParams) -> None:
        pairs, switch = site.tensors["pairs"], site.tensors["switch"]
        for index, (pair, (inv_freq, factor)) in enumerate(zip(pairs, regimes(p, switch))):
            rows = p.position_limit if index == len(pairs) - 1 else pair.cos.shape[0]
            cos, sin = exact_from(inv_freq, factor, np.arange(rows))
            pair.write(cos.astype(pair.cos.dtype), sin.astype(pair.sin.dtype))
        record_limit(graph.model, site.tensors["cos"], p.position_limit)

    def diagnose(self, graph: Graph, site: Site, p: rope.RopeParams | None, context: dict[str, Any]) -> None:
        if "pairs" not in site.tensors:
            site.faults.append(Fault("unrecognised-caches", f"{site.recovered['caches']}: posexport cannot measure or rebuild them"))
            return
        pairs, switch, rows = site.tensors["pairs"], site.tensors["switch"], site.recovered["rows"]
        if chosen_limits(graph.model).get(site.tensors["cos"]) != rows:
            site.faults.append(Fault("position-limit", f"the caches stop at position {rows - 1}; past it {self.past_limit(site)}", rows))
        else:
            site.notes.append(f"position limit {rows} (chosen with posexport patch)")
        low = str(pairs[0].cos.dtype) in LOW_PRECISION
        moving = sorted(s for s in context["scalings"] if s in SCALINGS and decided_per_call(s))
        if moving and switch is None:
            site.faults.append(self.frozen(pairs[0], dynamic_rope(context["ropes"], 2 * pairs[0].cos.shape[1]), moving))
        elif p is None:
            site.notes.append("precision not measured: frequencies unrecognised; pass --from-model DIR or --from-config FILE")
        else:
            for pair, truth in zip(pairs, regimes(p, switch)):
                if low:
                    self.low_precision(site, pair, truth)
                else:
                    self.precision(site, pair, truth, context.get("position_limit"))
            return
        if low:  # not measured: the rounding alone
            dtype, bound = str(pairs[0].cos.dtype), rounding_bound(pairs[0].cos.dtype)
            site.faults.append(Fault(f"{dtype}-cache", f"cos/sin stored in {dtype}: rounding alone is up to {bound:.2e} at any "
                                     "position (not measured against float64: the frequencies are not known)", bound))

    @staticmethod
    def frozen(pair: CachePair, p: rope.RopeParams | None, moving: list[str]) -> Fault:
        """Fixed caches where the config decides frequencies per call: for dynamic NTK, the cos/sin gap of the caches'
        frequencies (read back) to the config's at 2× and 4× max_position_embeddings, were the caches that long."""
        if p is None:
            return Fault("dynamic-exported-static", f"the model config says {' and '.join(moving)}, but the caches are fixed")
        detail, gap = dynamic_gaps(*from_cache(pair.cos, pair.sin), p, "the caches' frequencies")
        return Fault("dynamic-exported-static", f"{detail} (were the caches that long); one fixed pair cannot follow dynamic NTK, "
                     "so patch refuses these caches", gap)

    @staticmethod
    def low_precision(site: Site, pair: CachePair, truth: tuple[np.ndarray, float]) -> None:
        """Caches in float16 or bfloat16 (the op reads the model's float type): their error over every row
        against float64, beside what rounding the float64 values once would leave."""
        dtype, rows = str(pair.cos.dtype), len(pair.cos)
        error, floor, off = low_precision_error(pair.cos, pair.sin, truth)
        site.recovered.setdefault("cache_error_all_rows", []).append(error)
        how = (f"{off} of {2 * pair.cos.size} values are not that rounding (float32 angles, or a second rounding)" if off else
               f"these caches are that rounding, the least {dtype} allows (the op reads caches in the model's float type)")
        site.faults.append(Fault(f"{dtype}-cache", f"cos/sin stored in {dtype}: {error:.2e} off float64 over rows 0…{rows - 1}; the "
                                 f"float64 values rounded once to {dtype} would be {floor:.2e} off; {how}", error))

    def past_limit(self, site: Site) -> str:
        """What a runtime does once positions reach the caches' rows."""
        return PAST_LIMIT[site.recovered["op"]]

    @staticmethod
    def precision(site: Site, pair: CachePair, truth: tuple[np.ndarray, float], limit: int | None) -> None:
        last = len(pair.cos) - 1
        error = cache_error(pair.cos, pair.sin, truth, last)
        target = limit or PROJECTED
        projected = error * target / max(last, 1)
        site.recovered.setdefault("cache_error_last_row", []).append(error)
        detail = f"cos/sin vs float64: {error:.2e} at row {last}; growing with position, ~{projected:.1e} at position {target}"
        if error > PRECISION_FAULT:
            site.faults.append(Fault("precision", detail, error))
        else:
            site.notes.append(detail.split(";")[0] + " (exact to float rounding)")
