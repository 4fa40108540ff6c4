"""``python -m matrix.web`` (``make web-conformance``): posexport's graphs, and the contrib and standard ops
that its graphs and patched models use, on onnxruntime-web's WebAssembly and WebGPU providers in a headless
Chromium, beside ort-cpu, every output judged against the float64 oracle with the usual bounds.

- Encodings: each built graph's own parity sweep (lengths past the trained length and past the cached
  rows, decode steps, random offsets) and its declared properties (positions past the graph's limit must
  raise) through posexport.verdicts.run_parity: rope with every scaling on every backend, layouts, pair
  layouts, partial rotary, float16; mrope; alibi and t5 (scores and bias outputs); the vision encodings.
- Ops (ops.py beside this file): com.microsoft.GroupQueryAttention with do_rotary (interleaved or not)
  as onnxruntime-genai wires it (a full cos/sin cache, the positions taken from the past length) and as
  posexport's IndexShare block does; MultiHeadAttention with attention_bias; RotaryEmbedding (the contrib
  op and RotaryEmbedding-23) with position_ids past their cache.

Rewrites the table between the markers in docs/runtimes.md, and docs/web-repros/ (a minimal graph of each
wrong result found, and its README). The same run gives the same page, timings aside.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posexport import export, verdicts
from posexport.reports.markdown import md_table
from posexport.runtimes import get_runtime

from . import web_ops as ops  # noqa: I001

RUNTIMES = ("ort-cpu", "ort-web-wasm", "ort-webgpu")
START, END = "<!-- web-conformance:start -->", "<!-- web-conformance:end -->"
L0 = 64
SHORT, LONG = tuple(1.0 + 0.25 * i for i in range(8)), tuple(1.0 + 3.0 * i for i in range(8))
ROPE = dict(head_dim=16, heads=2, max_positions=512, position_limit=8192)
# Every scaling, each with the parameters it needs (small heads; L0 = 64 so that crossing it is cheap).
SCALINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "linear": dict(scaling="linear", factor=4.0),
    "ntk": dict(scaling="ntk", factor=4.0),
    "dynamic": dict(scaling="dynamic", factor=4.0, max_positions=L0),
    "yarn": dict(scaling="yarn", factor=4.0, original_max_positions=L0, max_positions=4 * L0, mscale=0.707, mscale_all_dim=1.0),
    "llama3": dict(head_dim=32, scaling="llama3", factor=8.0, original_max_positions=L0, max_positions=8 * L0,
                   low_freq_factor=1.0, high_freq_factor=4.0, base=500000.0),
    "longrope": dict(scaling="longrope", original_max_positions=L0, max_positions=32 * L0, short_factor=SHORT, long_factor=LONG),
    "proportional": dict(scaling="proportional", proportion=0.5),
}
FORMS: dict[str, dict[str, Any]] = {
    "layout bhsd": dict(layout="bhsd"),
    "layout bsh (packed)": dict(layout="bsh"),
    "pairs interleaved": dict(pair_layout="interleaved"),
    "pairs deinterleave": dict(pair_layout="deinterleave"),
    "partial rotary 8 of 16": dict(rotary_dim=8),
    "partial, interleaved, bhsd": dict(head_dim=24, rotary_dim=16, pair_layout="interleaved", layout="bhsd"),
}
BACKEND_OPSET = {"portable": 18, "onnx23": 23, "ort": 18}


@dataclass
class Row:
    group: str
    case: str
    checks: str
    cells: dict[str, str]


def graph_rows() -> list[tuple[str, str, str, str, dict[str, Any], str, str]]:
    """(group, case, what it checks, encoding, values, dtype, backend) of every built graph the matrix sweeps."""
    rows = []
    for name, values in SCALINGS.items():
        for backend in BACKEND_OPSET:
            rows.append(("rope scalings", f"{name}, {backend}", "the scaling's tables or in-graph switch, every sweep length",
                         "rope", {**ROPE, **values}, "float32", backend))
    for name, values in FORMS.items():
        for backend in BACKEND_OPSET:
            rows.append(("rope forms", f"{name}, {backend}", "channel and axis layouts", "rope", {**ROPE, **values}, "float32", backend))
    for backend in BACKEND_OPSET:
        rows.append(("float16", f"rope, {backend}", "float16 I/O (tables float32 inside)", "rope", ROPE, "float16", backend))
        rows.append(("float16", f"rope partial interleaved, {backend}", "float16, partial rotary, interleaved pairs", "rope",
                     {**ROPE, "rotary_dim": 8, "pair_layout": "interleaved"}, "float16", backend))
        rows.append(("mrope", f"mrope, {backend}", "three position rows, sections", "mrope",
                     dict(head_dim=16, heads=2, mrope_section="2,3,3"), "float32", backend))
    rows.append(("mrope", "glm4v, portable", "chunked sections, partial, interleaved", "mrope",
                 dict(head_dim=16, heads=2, rotary_dim=8, mrope_section=(2, 1, 1), pair_layout="interleaved"), "float32", "portable"))
    for encoding, values in (("alibi", dict(heads=3)), ("alibi", dict(heads=4, causal=False)), ("alibi", dict(heads=3, output="bias")),
                             ("t5", dict(heads=2, num_buckets=8, max_distance=20)),
                             ("t5", dict(heads=2, num_buckets=8, max_distance=20, output="bias"))):
        label = ", ".join(f"{k} {v}" for k, v in values.items() if k != "heads") or "causal"
        rows.append(("attention biases", f"{encoding} {label}", "the bias, KV-cache aligned queries", encoding, values, "float32", "portable"))
        rows.append(("float16", f"{encoding} {label}", "float16 scores or bias", encoding, values, "float16", "portable"))
    for encoding, values in (("vit-learned", dict(dim=8, trained_h=3, trained_w=4, max_grid=16)), ("sincos-2d", dict(dim=8, max_grid=16)),
                             ("swin", dict(heads=2, window_h=3, window_w=2)), ("rope-2d", dict(head_dim=8, heads=2, max_grid=16)),
                             ("sinusoidal", dict(d_model=16, position_limit=8192)), ("learned", dict(d_model=16, max_positions=64)),
                             ("query-scale", dict(head_dim=8, heads=2, floor_scale=64, max_positions=512))):
        what = "bicubic antialiased resampling to every grid" if encoding == "vit-learned" else "the encoding's sweep"
        rows.append(("other encodings", encoding, what, encoding, values, "float32", "portable"))
    return rows


def cell(report: verdicts.Report, runtime: str) -> str:
    """One runtime's outcome on one graph: pass with its worst error, FAIL naming the case, or unsupported."""
    why = report.unavailable.get(runtime)
    if why and why.startswith("failed to load"):  # a valid graph that onnxruntime CPU runs: the runtime's failure
        return f"**FAIL** to load: {ops.load_error(RuntimeError(why.split(': ', 2)[-1]))}"
    if why:
        return f"unsupported: {why}"
    mine = [r for r in report.results if r.runtime == runtime]
    props = [p for p in report.properties if p.runtime == runtime]
    bad = [r for r in mine if r.status != "pass"]
    worst = max((r.comparison.normalised for r in mine if r.comparison is not None), default=0.0)
    parts = []
    if bad:
        first = bad[0]
        parts.append(f"**FAIL** {len(bad)}/{len(mine)} cases, e.g. {first.case}: {first.message}")
    else:
        parts.append(f"pass {len(mine)}/{len(mine)}, worst {worst:.1e}")
    for p in props:
        if p.status == "limitation":
            parts.append(f"known limit: {p.property}")
        elif p.status != "pass":
            parts.append(f"**FAIL** {p.property}: {p.detail}")
    return "; ".join(parts)


def graph_cells(encoding: str, values: dict[str, Any], dtype: str, backend: str) -> dict[str, str]:
    art = export.build(encoding, values, dtype=dtype, backend=backend, opset=BACKEND_OPSET[backend])
    report = verdicts.run_parity(art, list(RUNTIMES))
    cells = {name: cell(report, name) for name in RUNTIMES}
    share = ops.webgpu_share(report.notes.get("ort-webgpu", ""))
    if share:
        cells["ort-webgpu"] += f" ({share})"
    return cells


def run(out: Path, repros: Path, only: str) -> None:
    started = time.time()
    rows: list[Row] = []
    chosen = [g for g in graph_rows() if re.search(only, f"{g[0]} {g[1]}")]
    for i, (group, case, checks, encoding, values, dtype, backend) in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {group}: {case}", file=sys.stderr, flush=True)
        rows.append(Row(group, case, checks, graph_cells(encoding, values, dtype, backend)))
    judged = []
    for group, case, checks, make in ops.CASES:
        if re.search(only, f"{group} {case}"):
            print(f"[op] {group}: {case}", file=sys.stderr, flush=True)
            made = make()
            rows.append(Row(group, case, checks, ops.judge(made, RUNTIMES)))
            judged.append((group, case, made))
    found = ops.write_repros(repros, judged, descriptions())
    write_page(out, rows, found)
    print(f"{len(rows)} cases in {(time.time() - started) / 60:.1f} min", file=sys.stderr)


def descriptions() -> list[str]:
    return [f"- `{name}`: {get_runtime(name).description}" for name in RUNTIMES]


def summary(rows: list[Row]) -> list[str]:
    lines = []
    for runtime in RUNTIMES:
        fails = [r for r in rows if "**FAIL**" in r.cells.get(runtime, "")]
        limits = [r for r in rows if "known limit" in r.cells.get(runtime, "")]
        unsupported = [r for r in rows if r.cells.get(runtime, "").startswith("unsupported")]
        lines.append(f"- `{runtime}`: {len(rows) - len(fails) - len(unsupported)} of {len(rows)} cases pass"
                     + (f" ({len(limits)} with a known limit)" if limits else "")
                     + (f"; **{len(fails)} fail**: {', '.join(f'{r.group} / {r.case}' for r in fails)}" if fails else "")
                     + (f"; {len(unsupported)} unsupported" if unsupported else ""))
    return lines


def write_page(out: Path, rows: list[Row], repros: list[str]) -> None:
    from posexport.runtimes.ort_web import pinned_version

    table = md_table(("group", "case", "checks", *RUNTIMES), ((r.group, r.case, r.checks, *(r.cells[n] for n in RUNTIMES)) for r in rows))
    body = [START, "", f"Generated by `make web-conformance` (onnxruntime-web {pinned_version()}, {len(rows)} cases); do not "
            "edit by hand.", "", *descriptions(), "", *summary(rows), "",
            *(["Minimal graphs of what fails, with what each runtime returns: [web-repros/](web-repros/README.md) ("
               + ", ".join(f"`{name}`" for name in repros) + ")."] if repros else []), "", *table, END]
    text = out.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"error: {out} has no {START} … {END} markers to write the table between")
    head, rest = text.split(START, 1)
    out.write_text(head + "\n".join(line for line in body) + rest.split(END, 1)[1])
    print(f"wrote {out} ({len(rows)} cases)", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m matrix.web", description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", type=Path, default=Path("docs/runtimes.md"), help="the page whose marked table is rewritten")
    parser.add_argument("--repros", type=Path, default=Path("docs/web-repros"), help="where the minimal graphs go")
    parser.add_argument("--only", default="", help="a regular expression: only the cases whose 'group case' it finds")
    args = parser.parse_args(argv)
    for name in RUNTIMES:
        ok, why = get_runtime(name).available()
        if not ok:
            raise SystemExit(f"error: {name} is unavailable here: {why}")
    run(args.page, args.repros, args.only)


if __name__ == "__main__":
    main()

