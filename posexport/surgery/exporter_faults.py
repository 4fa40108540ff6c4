"""Exporters' known positional faults, checked against the model folder the user gives (--from-model):
one small function per fault in CHECKS, each naming the exporters it is known of and reporting, with
numbers, what the graph computes against what the config says. Every check runs on every model (an
exporter not listed can have the fault too); the report says whose fault it is known to be."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import params as params_mod
from ..errors import PosexportError
from ..rope import encoding as rope
from ..rope.scaling import switch_length
from .exporters import Exporter
from .freqs import LOW_PRECISION, angle_gap, from_cache, other_regime_gap, recognise, rounding_bound
from .rope_cache import CacheKind
from .rope_cache_gathered import GatheredCacheKind
from .sites import Fault, Site

CACHE_KINDS = (CacheKind.name, GatheredCacheKind.name)  # sites whose cos/sin are stored caches of some rows
PLAIN_BASE = 10000.0  # what transformers 4.x builds when it finds no rope_theta


@dataclass
class Context:
    sites: list[Site]
    ropes: list[dict[str, Any]]  # every rope the model folder describes (posexport.models)
    config: dict[str, Any]  # the folder's config.json as saved
    exporter: Exporter
    chosen: dict[str, int] = field(default_factory=dict)  # cache tensor -> rows posexport patch chose for it


def graph_freqs(site: Site) -> np.ndarray | None:
    """float64 frequencies a rope site computes (per call) or stores (the first cache pair)."""
    if site.tensors.get("inv_freq") is not None:
        return np.asarray(site.tensors["inv_freq"], dtype=np.float64)
    if site.tensors.get("pairs"):
        return from_cache(site.tensors["pairs"][0].cos, site.tensors["pairs"][0].sin)[0]
    return None


def rope_sites(ctx: Context) -> list[tuple[Site, np.ndarray]]:
    return [(s, f) for s in ctx.sites if (f := graph_freqs(s)) is not None]


def params(values: dict[str, Any], width: int, **extra: Any) -> rope.RopeParams | None:
    try:
        return params_mod.build(rope.RopeParams, values | {"head_dim": width, "rotary_dim": width} | extra)
    except PosexportError:
        return None


def off(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.max(np.abs(ours / theirs - 1)))


def ropes_of(ctx: Context, scaling: str) -> list[tuple[Site, np.ndarray, rope.RopeParams]]:
    """(site, graph frequencies, the folder's rope of this scaling at the site's width)."""
    out = []
    for site, freqs in rope_sites(ctx):
        for values in ctx.ropes:
            p = params(values, 2 * len(freqs)) if values.get("scaling") == scaling else None
            if p is not None:
                out.append((site, freqs, p))
    return out


def dynamic_as_plain(ctx: Context) -> list[Fault]:
    faults = []
    for site, freqs, p in ropes_of(ctx, "dynamic"):
        if site.kind != "posexport":
            length = 2 * p.max_positions
            truth, _ = rope.inv_freq_and_factor(p, length)
            fixed, gap = recognise(freqs), angle_gap(freqs, truth, length - 1)
            base = f" (a fixed base {fixed['base']:g})" if fixed and "scaling" not in fixed else ""
            faults.append(Fault("dynamic-ntk-built-as-plain", f"{site.anchor}: the config says dynamic NTK (factor {p.factor:g}, base "
                                f"{p.base:g}); the graph's frequencies are fixed{base}: cos/sin {gap:.2e} off at position {length - 1} "
                                f"of a {length}-token call", gap))
    return faults


def yarn_rounded_otherwise(ctx: Context, truncate: bool) -> list[tuple[Site, float]]:
    """(site, largest relative frequency error) where the config's YaRN says ``truncate`` (floor/ceil of the
    correction range, transformers' default, or not) and the graph's frequencies follow the other rounding."""
    out = []
    for site, freqs, p in ropes_of(ctx, "yarn"):
        if (p.truncate is not False) != truncate:
            continue
        said, _ = rope.inv_freq_and_factor(p)
        other, _ = rope.inv_freq_and_factor(params(params_mod.to_dict(p), len(said) * 2, truncate=not truncate))
        if off(said, other) > 1e-6 and off(freqs, other) < off(freqs, said):
            out.append((site, off(freqs, said)))
    return out


def yarn_unrounded(ctx: Context) -> list[Fault]:
    return [Fault("yarn-without-floor-ceil", f"{site.anchor}: the graph's YaRN frequencies skip the floor/ceil of the correction "
                  f"range that the config's (truncate true) applies: up to {gap:.2e} relative off", gap)
            for site, gap in yarn_rounded_otherwise(ctx, True)]


def yarn_truncate_ignored(ctx: Context) -> list[Fault]:
    return [Fault("yarn-truncate-ignored", f"{site.anchor}: the config's YaRN says truncate false (no floor/ceil of the correction "
                  f"range), the graph's frequencies apply it anyway: up to {gap:.2e} relative off", gap)
            for site, gap in yarn_rounded_otherwise(ctx, False)]


def base_lost(ctx: Context) -> list[Fault]:
    """The config gives several ropes (Gemma-3's local and global) but the graph computes fewer."""
    found = rope_sites(ctx)
    if len(ctx.ropes) < 2 or not found:
        return []
    width = 2 * len(found[0][1])
    truths = [(v, p) for v in ctx.ropes if (p := params(v, width)) is not None]
    matched = {i for _, f in found for i, (_, p) in enumerate(truths) if off(f, rope.inv_freq_and_factor(p)[0]) < 1e-3}
    lost = [p for i, (_, p) in enumerate(truths) if i not in matched]
    if len(truths) < 2 or not lost:
        return []
    at = lost[0].max_positions - 1
    gap = angle_gap(found[0][1], rope.inv_freq_and_factor(lost[0])[0], at)
    bases = ", ".join(f"{p.base:g} ({p.scaling})" for _, p in truths)
    return [Fault("per-layer-base-lost", f"the config gives {len(truths)} ropes (bases {bases}) but the graph's {len(found)} rope site(s) "
                  f"compute {len(matched)} of them: layers of base {lost[0].base:g} get cos/sin {gap:.2e} off at position {at}", gap)]


def longrope_frozen(ctx: Context) -> list[Fault]:
    faults = []
    for site, freqs, p in ropes_of(ctx, "longrope"):
        if site.tensors.get("switch") is not None or site.tensors.get("long_inv_freq") is not None:
            continue
        original = switch_length(p)
        short, long = rope.inv_freq_and_factor(p, original)[0], rope.inv_freq_and_factor(p, original + 1)[0]
        regime = "short" if off(freqs, short) <= off(freqs, long) else "long"
        at, gap = other_regime_gap(freqs, p, regime)
        faults.append(Fault("longrope-frozen", f"{site.anchor}: LongRoPE frozen to its {regime} regime (no switch at length {original}): "
                            f"cos/sin {gap:.2e} off at position {at}", gap))
    return faults


def half_caches(ctx: Context) -> list[Fault]:
    """Caches in float16 or bfloat16: their measured error over every row when the site's rope is known,
    else the most their rounding alone can leave."""
    faults = []
    for site in ctx.sites:
        dtype = site.recovered.get("dtype") if site.kind in CACHE_KINDS else None
        if dtype not in LOW_PRECISION:
            continue
        measured = site.recovered.get("cache_error_all_rows")
        value = max(measured) if measured else rounding_bound(site.tensors["pairs"][0].cos.dtype)
        what = "off float64 over every row" if measured else "of rounding alone at any position (not measured)"
        faults.append(Fault(f"{dtype}-cache", f"{site.anchor}: cos/sin caches stored in {dtype}: {value:.2e} {what}; the op needs the "
                            "model's float type, so patch rebuilds them in it, rounded once from float64", value))
    return faults


def promised(rope: dict[str, Any]) -> int:
    """The positions a rope's config promises: max_position_embeddings, or, where a scaling names its
    original length, factor × that length when it is more (a YaRN config of 32768 positions, factor 4)."""
    length = int(rope.get("max_positions") or 0)
    if rope.get("factor") and rope.get("original_max_positions"):
        length = max(length, int(float(rope["factor"]) * int(rope["original_max_positions"])))
    return length


def caches_cut(ctx: Context) -> list[Fault]:
    """Stored caches holding fewer rows than the config promises positions. Rows posexport patch chose
    are the user's limit (doctor notes it), never this fault."""
    length = max((promised(v) for v in ctx.ropes), default=0)
    return [Fault("caches-cut-at-max-positions", f"{site.anchor}: the caches hold {site.recovered['rows']} rows, the config promises "
                  f"{length} positions: a longer context fails at position {site.recovered['rows']} (`posexport patch "
                  "--position-limit N` rebuilds them longer)", float(site.recovered["rows"]))
            for site in ctx.sites if site.kind in CACHE_KINDS and site.recovered.get("rows", length) < length
            and ctx.chosen.get(site.tensors.get("cos", "")) != site.recovered["rows"]]


def spelling_misread(ctx: Context) -> list[Fault]:
    """transformers 4.x reads rope_theta and rope_scaling only: a config in transformers 5's spelling (rope_parameters)
    loads as plain rope with the top-level rope_theta, base 10000 without one (the config a 4.x exporter saves beside
    its model has that rope_theta written in, beside the rope_parameters it kept unread)."""
    read_by = ctx.exporter.transformers or ""
    spelled = ctx.config.get("rope_parameters")
    if not read_by or int(read_by.split(".")[0]) >= 5 or not isinstance(spelled, dict) or ctx.config.get("rope_scaling"):
        return []
    base = float(ctx.config.get("rope_theta", PLAIN_BASE))
    faults = []
    for site, freqs in rope_sites(ctx):
        plain = base ** (-np.arange(0, 2 * len(freqs), 2, dtype=np.float64) / (2 * len(freqs)))
        truths = [rope.inv_freq_and_factor(p)[0] for v in ctx.ropes if (p := params(v, 2 * len(freqs))) is not None]
        if truths and off(freqs, plain) < 1e-4 and min(off(plain, t) for t in truths) > 1e-4:
            said = f"{spelled.get('rope_type', 'default')} rope, base {spelled.get('rope_theta', PLAIN_BASE):g}"
            gap = min(off(plain, t) for t in truths)
            faults.append(Fault("config-spelling-misread", f"{site.anchor}: transformers {read_by} ignores rope_parameters ({said}): the graph "
                                f"is plain rope base {base:g}, its frequencies up to {gap:.3g}× off the config's; repair it with "
                                "`posexport patch --from-model DIR --replace-mismatched`, or re-export from a config in transformers "
                                "4.x spelling (rope_theta, rope_scaling)", gap))
    return faults


# fault -> (exporters it is known of, the check)
CHECKS: dict[str, tuple[tuple[str, ...], Callable[[Context], list[Fault]]]] = {
    "dynamic-ntk-built-as-plain": (("onnxruntime-genai", "mobius-onnx", "torch.onnx"), dynamic_as_plain),
    "yarn-without-floor-ceil": (("onnxruntime-genai",), yarn_unrounded),
    "yarn-truncate-ignored": (("mobius-onnx",), yarn_truncate_ignored),
    "per-layer-base-lost": (("onnxruntime-genai",), base_lost),
    "longrope-frozen": (("torch.onnx", "optimum-onnx"), longrope_frozen),
    "half-float-cache": (("onnxruntime-genai",), half_caches),
    "caches-cut-at-max-positions": (("onnxruntime-genai", "mobius-onnx"), caches_cut),
    "config-spelling-misread": (("optimum-onnx",), spelling_misread),
}


def check_known_faults(sites: list[Site], ropes: list[dict[str, Any]], folder: Path, exporter: Exporter,
                       chosen: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every known exporter fault found, as report entries naming whose fault it is known to be."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    ctx = Context(sites, ropes, config if isinstance(config, dict) else {}, exporter, dict(chosen or {}))
    out = []
    for check, (known_of, run) in CHECKS.items():
        for fault in run(ctx):
            out.append(fault.as_dict() | {"check": check, "known_of": list(known_of),
                                          "this_exporter": any(exporter.name.startswith(k) for k in known_of)})
    return out
