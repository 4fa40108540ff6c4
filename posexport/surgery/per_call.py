"""Rotary cos/sin computed in the graph on every call, as the per-call kinds find it (rope-inv-freq, rope-matmul,
rope-interleaved, and the per-token caches formed from them): the angles Mul(Cast(positions), inv_freq) that most of
them share, and PerCallKind, what every such kind does with its pairs once its pattern has traced their angles.

Every Cos/Sin pair formed from the same positions and frequencies is one site (one per layer in older exports, one
per model in newer ones). The rewrite computes posexport's cos/sin once per call, from exact float64 tables (or
dynamic NTK / LongRoPE decided in the graph), attention factor inside the tables, and hands every pair its original
output names at the width it had; nothing downstream changes."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh

from ..errors import PosexportError
from ..onnxgraph.graph import Graph, attribute, node_label, whole_length
from ..rope import encoding as rope
from ..rope.scaling import DYNAMIC, REGIMES, TABLES, source_of, switch_length
from .freqs import PROJECTED, RECOGNISED, close, describe, dynamic_gaps, float32_error, other_regime_gap, recognise
from .replace import add_cos_sin_call, remove_dead, splice_nodes, upstream
from .pattern import Miss
from .rebuilds import ROPE
from .sites import Fault, Mismatch, Site, SiteKind

FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE)


def scalar(graph: Graph, name: str) -> float | None:
    value = graph.array(name)
    if value is None or value.size != 1:
        return None
    return float(value.reshape(()))


def factor_after(graph: Graph, out: str) -> tuple[str, float, str | None]:
    """(final tensor, attention factor, Mul node name) after Cos or Sin: an optional Mul by a scalar."""
    users = graph.consumers.get(out, [])
    if len(users) == 1 and users[0].op_type == "Mul" and out not in graph.outputs:
        mul = users[0]
        other = mul.input[1] if mul.input[0] == out else mul.input[0]
        value = scalar(graph, other)
        if value is not None:
            return mul.output[0], value, mul.name
    return out, 1.0, None


def positions_source(graph: Graph, name: str) -> tuple[str, list[str], bool] | None:
    """The int positions behind Cast(Unsqueeze(…)) when the Unsqueeze adds the last axis: (tensor, nodes
    passed, whether the tensor still carries that axis). position_ids [b, s] unsqueezed at -1 (or 2) is
    read directly; a Range [s] unsqueezed at (0, 2) is read as the Unsqueeze's output without its last axis."""
    node = graph.producer.get(name)
    if node is None or node.op_type != "Unsqueeze":
        return None
    axes = graph.array(node.input[1]) if len(node.input) > 1 else np.array(attribute(node, "axes", []))
    axes = None if axes is None else sorted(int(a) for a in np.ravel(axes))
    if axes in ([-1], [2]):
        return node.input[0], [node.name], False
    source = graph.producer.get(node.input[0])
    if axes and source is not None and source.op_type == "Range" and axes[-1] == len(axes):
        return node.output[0], [], True
    return None


def regime_switch(graph: Graph, cond: str, positions: str) -> tuple[int, list[str]] | None:
    """(L0, nodes) of Greater(Add(ReduceMax(positions), 1), L0): LongRoPE's per-call regime choice."""
    greater = graph.producer.get(cond)
    if greater is None or greater.op_type != "Greater":
        return None
    add, limit = graph.producer.get(greater.input[0]), whole_length(scalar(graph, greater.input[1]))
    if add is None or add.op_type != "Add" or limit is None:
        return None
    reduce = next((graph.producer.get(i) for i in add.input if graph.producer.get(i) is not None), None)
    one = [scalar(graph, i) for i in add.input if graph.producer.get(i) is None or graph.producer[i].op_type == "Constant"]
    if reduce is None or reduce.op_type != "ReduceMax" or reduce.input[0] != positions or one != [1.0]:
        return None
    return limit, [greater.name, add.name, reduce.name]


def frequencies(graph: Graph, name: str, positions: str) -> dict[str, Any] | None:
    """The frequencies a Mul reads: a constant [n], or Where(seq_len > L0, long [n], short [n])."""
    value = graph.array(name)
    if value is not None:
        return {"inv_freq": value, "freq_names": [name]} if value.ndim == 1 else None
    where = graph.producer.get(name)
    if where is None or where.op_type != "Where":
        return None
    long, short = graph.array(where.input[1]), graph.array(where.input[2])
    switch = regime_switch(graph, where.input[0], positions)
    if long is None or short is None or long.shape != short.shape or long.ndim != 1 or switch is None:
        return None
    return {"inv_freq": short, "long_inv_freq": long, "switch": switch[0], "freq_names": [where.input[1], where.input[2]],
            "regime_nodes": [where.name, *switch[1]]}


def halves_repeated(graph: Graph, angle: str) -> tuple[str, list[str]] | Miss:
    """(the angles under an optional Concat(a, a) on the last axis, the Concat's name if there is one)."""
    node = graph.producer.get(angle)
    if node is not None and node.op_type == "Concat" and len(node.input) == 2 and node.input[0] == node.input[1]:
        if int(attribute(node, "axis", 0)) not in (-1, 2):
            return Miss(f"{node_label(node)} repeats the angles along axis {attribute(node, 'axis', 0)}, not the last")
        return node.input[0], [node.name]
    return angle, []


def trace_angle(graph: Graph, angle: str) -> dict[str, Any] | Miss:
    """Mul(Cast(positions unsqueezed), frequencies) behind a Cos/Sin input, widened or not by Concat(a, a)."""
    under = halves_repeated(graph, angle)
    found = trace_product(graph, graph.producer.get(under[0])) if under else under
    if not found:
        return found
    return found | {"nodes": found["nodes"] + under[1], "full_width": bool(under[1])}


def trace_product(graph: Graph, node: onnx.NodeProto | None) -> dict[str, Any] | Miss:
    """Mul(Cast(positions unsqueezed), frequencies): the angles [..., n] before any widening."""
    if node is None or node.op_type != "Mul":
        return Miss(f"the angles are made by {node_label(node) if node is not None else 'no node'}, not by Mul")
    for pos_side, freq_side in ((0, 1), (1, 0)):
        cast = graph.producer.get(node.input[pos_side])
        if cast is None or cast.op_type != "Cast" or int(attribute(cast, "to", 0)) not in FLOAT_TYPES:
            continue
        source = positions_source(graph, cast.input[0])
        found = frequencies(graph, node.input[freq_side], source[0]) if source else None
        if found is None:
            return Miss(f"{node_label(node)}'s frequencies are neither a stored [n] vector nor LongRoPE's Where of two"
                        if source else f"{node_label(cast)} casts no positions unsqueezed at the last axis")
        positions, passed, squeeze = source
        nodes = passed + [cast.name, node.name] + found.pop("regime_nodes", [])
        return found | {"freq_name": node.input[freq_side], "positions": positions, "squeeze": squeeze, "nodes": nodes,
                        "float_type": int(attribute(cast, "to"))}
    return Miss(f"{node_label(node)} multiplies no positions cast to a float")


# How a graph widens cos/sin [..., n] to the width its rotation reads (False: it does not), and the same
# widening of posexport's cos/sin: halves repeated (Concat(a, a)), or each frequency twice in a row.
LAYOUTS = {False: "half width, laid out downstream", True: "halves repeated (Concat(a, a))",
           "interleaved": "each frequency repeated twice in a row (repeat_interleave)"}


def widen_interleaved(half: str, name: str, out: str) -> list[onnx.NodeProto]:
    axis = oh.make_node("Constant", [], [f"{out}/posexport_axis"], value_ints=[-1], name=f"{out}/posexport_axis")
    flat = oh.make_node("Constant", [], [f"{out}/posexport_shape"], value_ints=[0, 0, -1], name=f"{out}/posexport_shape")
    pair = oh.make_node("Unsqueeze", [half, axis.output[0]], [f"{out}/posexport_pair"], name=f"{out}/posexport_unsqueeze")
    twice = oh.make_node("Concat", [pair.output[0], pair.output[0]], [f"{out}/posexport_twice"], axis=-1, name=f"{out}/posexport_concat")
    return [axis, flat, pair, twice, oh.make_node("Reshape", [twice.output[0], flat.output[0]], [name], name=f"{out}/posexport_reshape")]


WIDEN = {
    False: lambda half, name, out: [oh.make_node("Identity", [half], [name], name=f"{out}/posexport_identity")],
    True: lambda half, name, out: [oh.make_node("Concat", [half, half], [name], axis=-1, name=f"{out}/posexport_concat")],
    "interleaved": widen_interleaved,
}


def feeds_of(graph: Graph, names: list[str]) -> list[str]:
    """Nodes fed by these tensors, looking through Unsqueeze/Cast/Reshape/Expand."""
    out: list[str] = []
    todo = list(names)
    while todo:
        for node in graph.consumers.get(todo.pop(0), []):
            if node.op_type in ("Unsqueeze", "Cast", "Reshape", "Expand"):
                todo += list(node.output)
            elif node.name not in out:
                out.append(node.name)
    return out


def held_regimes(site: Site, p: rope.RopeParams) -> dict[str, tuple[np.ndarray, float]]:
    """(inv_freq, attention factor) the graph's one set of frequencies may hold, by regime: the parameters'
    own (regime "", below any switch length), or, when the parameters say LongRoPE and the graph does not
    switch (a trace froze it to one regime), "short" or "long": the rewrite puts the switch back."""
    if site.tensors["long_inv_freq"] is not None or source_of(p) != REGIMES:
        return {"": rope.inv_freq_and_factor(p, None)}
    original = switch_length(p)
    return {"short": rope.inv_freq_and_factor(p, original), "long": rope.inv_freq_and_factor(p, original + 1)}


def regime_held(site: Site, p: rope.RopeParams) -> str | None:
    """The regime of ``held_regimes`` whose frequencies and attention factor the graph has, else None."""
    stored, factor = site.tensors["inv_freq"], site.recovered["attention_factor"]
    return next((regime for regime, (inv_freq, expected) in held_regimes(site, p).items()
                 if close(stored, inv_freq) and abs(factor - expected) <= RECOGNISED * max(1.0, expected)), None)


def frozen_faults(site: Site, p: rope.RopeParams) -> list[Fault]:
    """A graph with fixed frequencies where the parameters decide them per call: dynamic NTK, or LongRoPE
    frozen to one regime (the numbers: cos/sin against the parameters' where they differ)."""
    stored, factor = site.tensors["inv_freq"], site.recovered["attention_factor"]
    regime = regime_held(site, p)
    if regime:
        at, gap = other_regime_gap(stored, p, regime)
        return [Fault("longrope-frozen", f"the model config says LongRoPE, the graph holds its {regime} regime only (no switch at "
                      f"length {switch_length(p)}): cos/sin {gap:.2e} off at position {at}; patch with --from-model", gap)]
    if source_of(p) != DYNAMIC:
        return []
    detail, gap = dynamic_gaps(stored, factor, p)
    return [Fault("dynamic-exported-static", f"{detail}; patch with --from-model", gap)]


class PerCallKind(SiteKind):
    """A kind whose sites are Cos/Sin pairs of angles computed per call; its pattern is ``trace``."""

    rebuilds = ROPE

    def match(self, graph: Graph) -> list[Site]:
        groups: dict[tuple, Site] = {}
        for node in graph.model.graph.node:
            pair = self.pair(graph, node)
            if pair is None:
                continue
            traced, cos_out, sin_out, factor, nodes = pair
            key = (traced["positions"], traced["freq_name"], factor, traced["full_width"])
            site = groups.get(key)
            if site is None:
                site = groups[key] = self.new_site(graph, node, traced, factor)
            site.tensors.setdefault("pairs", []).append((cos_out, sin_out))
            site.nodes += [n for n in traced["nodes"] + nodes if n not in site.nodes]
            site.feeds += [f for f in feeds_of(graph, [cos_out, sin_out]) if f not in site.feeds]
            site.recovered["cos_sin_pairs"] = len(site.tensors["pairs"])
        return list(groups.values())

    def trace(self, graph: Graph, angle: str) -> dict[str, Any] | Miss:
        """The kind's pattern: what the angles of a Cos/Sin input are made of."""
        raise NotImplementedError

    def pair(self, graph: Graph, node: onnx.NodeProto) -> tuple | None:
        if node.op_type != "Cos" or node.domain not in ("", "ai.onnx"):
            return None
        sins = [n for n in graph.consumers_of(node.input[0], "Sin")]
        traced = self.trace(graph, node.input[0])
        if not sins or not traced:
            return None
        cos_out, cos_factor, cos_mul = factor_after(graph, node.output[0])
        sin_out, sin_factor, sin_mul = factor_after(graph, sins[0].output[0])
        if cos_factor != sin_factor:
            return None
        nodes = [node.name, sins[0].name] + [n for n in (cos_mul, sin_mul) if n]
        return traced, cos_out, sin_out, cos_factor, nodes

    def new_site(self, graph: Graph, cos: onnx.NodeProto, traced: dict[str, Any], factor: float) -> Site:
        inv_freq = traced["inv_freq"].astype(np.float64)
        recovered = {
            "inv_freq": describe(inv_freq),
            "rotary_dim": 2 * len(inv_freq),
            # The rewrite repeats channels as the graph did; which channels pair up is decided downstream.
            "cos_layout": LAYOUTS[traced["full_width"]],
            "attention_factor": factor,
            "positions": traced["positions"],
            "recognised": recognise(inv_freq),
        }
        if "long_inv_freq" in traced:
            recovered |= {"long_inv_freq": describe(traced["long_inv_freq"]), "regime_switch": traced["switch"], "recognised": None}
        tensors = {"positions": traced["positions"], "squeeze": traced["squeeze"], "float_type": traced["float_type"],
                   "full_width": traced["full_width"]}
        site = Site(self.name, node_label(cos), [], recovered, tensors)
        site.tensors |= {"inv_freq": inv_freq, "long_inv_freq": traced.get("long_inv_freq"), "freq_names": traced["freq_names"]}
        return site

    def check(self, graph: Graph, site: Site, p: rope.RopeParams) -> None:
        self.check_regimes(site, p)
        if regime_held(site, p) is not None:
            return
        stored, factor = site.tensors["inv_freq"], site.recovered["attention_factor"]
        shown = "; ".join(f"{regime + ' regime: ' if regime else ''}{describe(f)}, factor {e:g}"
                          for regime, (f, e) in held_regimes(site, p).items())
        raise Mismatch(
            f"{site.anchor}: the graph's frequencies ({describe(stored)}, factor {factor:g}) are not those of the "
            f"{p.scaling} rope asked for ({shown})"
        )

    @staticmethod
    def check_regimes(site: Site, p: rope.RopeParams) -> None:
        """A graph that switches frequencies per call is LongRoPE, with the same switch and long factors."""
        long = site.tensors["long_inv_freq"]
        if long is not None and source_of(p) != REGIMES:
            raise PosexportError(f"{site.anchor}: the graph switches frequencies at a length (LongRoPE), but the parameters say "
                                 f"{p.scaling}; refusing to guess")
        if long is None:
            return
        original = switch_length(p)
        expected, _ = rope.inv_freq_and_factor(p, original + 1)
        if site.recovered["regime_switch"] != original or not close(long, expected):
            raise PosexportError(
                f"{site.anchor}: the graph switches to frequencies {describe(long)} past length {site.recovered['regime_switch']}, "
                f"not the parameters' {describe(expected)} past {original}; refusing to guess"
            )

    def rewrite(self, graph: Graph, site: Site, p: rope.RopeParams) -> None:
        cos_h, sin_h, new = add_cos_sin_call(graph, site.tensors["positions"], p, site.tensors["squeeze"])
        for cos_out, sin_out in site.tensors["pairs"]:
            for half, out in ((cos_h, cos_out), (sin_h, sin_out)):
                new += self.widen(half, out, site)
        old = upstream(graph, site.nodes)  # what the old angles were made of goes too, once nothing reads it
        splice_nodes(graph, site.nodes, new)
        remove_dead(graph.model, old, set(site.tensors["freq_names"]))

    @staticmethod
    def widen(half: str, out: str, site: Site) -> list[onnx.NodeProto]:
        """The pair's tensor at the width and float type the model's rotation expects."""
        name = f"{out}.posexport"
        last = oh.make_node("Cast", [name], [out], to=site.tensors["float_type"], name=f"{out}/posexport_cast")
        return WIDEN[site.tensors["full_width"]](half, name, out) + [last]

    def diagnose(self, graph: Graph, site: Site, p: rope.RopeParams | None, context: dict[str, Any]) -> None:
        stored, factor = site.tensors["inv_freq"], site.recovered["attention_factor"]
        pairs = site.recovered["cos_sin_pairs"]
        # Against the parameters' frequencies of the regime the graph holds (below their switch length, or a
        # frozen LongRoPE's one regime), or, with nothing known, against float64 angles of the graph's own.
        truth = held_regimes(site, p)[regime_held(site, p)] if p is not None else (stored.astype(np.float64), factor)
        known = p is not None and source_of(p) == TABLES
        if p is None:
            near = PROJECTED // 32 - 1
        else:
            near = (p.max_positions if known else switch_length(p)) - 1
        errors = {near: float32_error(stored, factor, truth, near)}
        if known or p is None:
            errors[PROJECTED - 1] = float32_error(stored, factor, truth, PROJECTED - 1)
        measured = ", ".join(f"{e:.2e} at position {at}" for at, e in errors.items())
        against = "" if p is not None else " (against the graph's own frequencies in float64)"
        site.faults.append(Fault("trig-per-call", f"cos/sin formed from float32 angles on every call, at every position of the call "
                                 f"({pairs} Cos/Sin pair(s)): "
                                 f"error {measured}{against}", max(errors.values())))
        if pairs > 1:
            site.notes.append(f"the same cos/sin is computed {pairs} times per call (once per layer)")
        if p is not None:
            site.faults += frozen_faults(site, p)
