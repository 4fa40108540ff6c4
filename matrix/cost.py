"""``python -m matrix.cost``: what the patch costs — `posexport bench --model FIXED --against ORIGINAL` for
a small Llama (SMALL, exported by dynamo and genai, patched as the matrix patches) at prompts of 512 and
2048 tokens and a decode step at 2048, then for every FIXED cell of a matrix run (its exports are still
in the run's --work folder) at the calls ``calls`` names. A call the original cannot run is reported
with its error, untimed. Writes benchmarks/patch-cost.{md,json}."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from posexport.bench.engine import machine
from posexport.bench.models import bench_models
from posexport.reports.bench import fmt
from posexport.reports.markdown import md_table

from .cell import POSITION_LIMIT, export
from .__main__ import shown
from .models import ARCHITECTURES, arch, build

PROMPTS = (512, 2048)
SHORT_CALLS = (20, 100)  # warm-up runs and timed runs of a decode step or a prompt shorter than PROMPTS[0]
# A model big enough that a call is not all per-node overhead (the matrix's tiny ones run a decode step in
# ~0.1 ms, where the patch's fixed handful of nodes shows), trained past 2048 so the original runs every call.
SMALL = arch("llama-small", "llama", hidden_size=512, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=4, vocab_size=100, max_position_embeddings=4096, initializer_range=0.02)


def exported(exporter: str, model: Path, out: Path) -> str:
    """The path of ``model`` exported by ``exporter`` into ``out`` (once per --work folder)."""
    record = out.with_name(out.name + ".export.json")
    if record.is_file():
        return json.loads(record.read_text())["onnx"]
    done = export(exporter, model, out)
    if "failed" in done:
        raise SystemExit(f"error: {exporter} could not export {SMALL.name}: {done['failed']}")
    record.write_text(json.dumps(done))
    return done["onnx"]


def small_cells(work: Path, exporters: list[str]) -> list[dict[str, Any]]:
    """SMALL exported by each of ``exporters`` and patched as the matrix patches (no parity: it is timed only)."""
    from posexport.surgery import patch_file, requested_values

    model = build(SMALL, work / "models")
    cells = []
    for exporter in exporters:
        out = work / f"{SMALL.name}--{exporter}"
        original = exported(exporter, model, out)
        fixed = out.with_name(out.name + "-fixed") / "model.onnx"
        if not fixed.is_file():
            fixed.parent.mkdir(parents=True, exist_ok=True)
            patch_file(original, fixed, requested_values(from_model=model), POSITION_LIMIT)
        cells.append({"architecture": SMALL.name, "exporter": exporter, "paths": {"original": original, "fixed": str(fixed)}})
    return cells


def fixing_llama(matrix: dict[str, Any]) -> list[str]:
    """The exporters whose llama cell the matrix run FIXED: SMALL is a Llama, exported by each of them."""
    return [c["exporter"] for c in matrix["cells"] if c["architecture"] == "llama" and c["verdict"] == "FIXED"]


def calls(cell: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Prompts and decode positions: SMALL at 512 and 2048; a tiny matrix model at its prompt inside the
    trained length and at 512 (a tiny model's 2048-token prompt is all attention-mask work, seconds a call
    on a loaded 2-core machine, and says nothing more about the rope)."""
    if cell["architecture"] == SMALL.name:
        return PROMPTS, PROMPTS[-1:]
    inside = ARCHITECTURES[cell["architecture"]].prompts[0]
    return (inside, PROMPTS[0]), (inside, PROMPTS[0])


def measure(cell: dict[str, Any], warmup: int, repeats: int) -> dict[str, Any]:
    """The cell's prompts of PROMPTS[0] tokens and more with ``warmup`` and ``repeats``; its decode steps and
    short prompts, which take microseconds to milliseconds, with SHORT_CALLS (ten runs of those are noise that
    leans on whichever side ran first: a decode step of the small Llama timed 1.09-1.21x at 2 warm-ups and 10
    runs, 1.01-1.03x at 20 and 100)."""
    from posexport.bench.models import ModelBench

    prompts, decode = calls(cell)
    groups = (([p for p in prompts if p < PROMPTS[0]], decode, SHORT_CALLS), ([p for p in prompts if p >= PROMPTS[0]], (), (warmup, repeats)))
    timed = [bench_models(cell["paths"]["fixed"], cell["paths"]["original"], group_prompts, group_decode, threads=1,
                          warmup=w, repeats=r) for group_prompts, group_decode, (w, r) in groups if group_prompts or group_decode]
    rows = sorted((row for t in timed for row in t.rows), key=lambda row: (row.past > 0, row.past or row.seq))
    data = ModelBench(timed[0].meta, rows).as_dict()
    return {"architecture": cell["architecture"], "exporter": cell["exporter"], "rows": data["rows"], "target": data["target"],
            "bytes": [data["meta"]["model_bytes"], data["meta"]["against_bytes"]]}


def markdown(meta: dict[str, Any], results: list[dict[str, Any]]) -> str:
    met = sum(r["target"]["met"] for r in results)
    lines = ["# What the patch costs: patched over original", "",
             f"`{SMALL.name}`: a Llama of hidden 512, 4 layers, 8 heads (max_position_embeddings 4096), exported by every "
             "exporter whose llama cell the matrix FIXED, and patched, for this run; the other rows are the FIXED cells of [the matrix](../docs/compatibility.md), tiny models whose "
             "calls take well under a millisecond, where the patch's fixed nodes per call show as a few percent.", "",
             "Made by (after `make matrix`, whose exports it times; see [docs/benchmarks.md](../docs/benchmarks.md)):", "",
             "```sh", meta["command"], "```", "",
             f"Measured {meta['time_utc']} UTC on {meta['cpu_count']} CPU(s), load average "
             f"{' / '.join(str(x) for x in meta['load_average'])}; onnxruntime CPU, 1 thread, each pair interleaved "
             f"round-robin in one process; prompts of {PROMPTS[0]} tokens and more: {meta['warmup']} warm-up runs, median of "
             f"{meta['repeats']}; decode steps and shorter prompts: {SHORT_CALLS[0]} warm-up runs, median of {SHORT_CALLS[1]}. Target: patched ≤ 1.03× "
             f"the original on every call both run — met by {met} of {len(results)} models.", ""]
    header = ("architecture", "exporter", "call", "original ms", "patched ms", "ratio", "note")
    body = []
    for r in results:
        for row in r["rows"]:
            body.append((r["architecture"], r["exporter"], row["call"], fmt(row["against_ms"]), fmt(row["model_ms"]),
                         fmt(row["ratio"], 3), row["note"]))
    lines += md_table(header, body)
    lines += ["## Per model", ""]
    lines += md_table(("architecture", "exporter", "worst ratio", "target", "file bytes patched / original"),
                      ((r["architecture"], r["exporter"], f"{r['target']['worst']['ratio']}× ({r['target']['worst']['call']})"
                        if r["target"]["worst"] else "—", "met" if r["target"]["met"] else "missed",
                        f"{r['bytes'][0]:,} / {r['bytes'][1]:,}") for r in results))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m matrix.cost")
    parser.add_argument("--matrix", type=Path, required=True, help="the matrix run's JSON (docs/compatibility.json)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--markdown", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("build/matrix-cost"), help="where the small model and its exports go")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--small-only", action="store_true",
                        help="time the small Llama alone, not the matrix's tiny FIXED cells (whose exports a matrix run leaves in its --work)")
    args = parser.parse_args(argv)
    matrix = json.loads(args.matrix.read_text())
    cells = [] if args.small_only else [c for c in matrix["cells"] if c["verdict"] == "FIXED"]
    missing = [c["paths"]["fixed"] for c in cells if not Path(c["paths"]["fixed"]).is_file()]
    if missing:
        raise SystemExit(f"error: {missing[0]} is gone: run `make matrix` first (its exports are timed), or give --small-only")
    start = time.monotonic()
    results = [measure(c, args.warmup, args.repeats) for c in small_cells(args.work, fixing_llama(matrix)) + cells]
    meta = machine() | {"command": "python -m matrix.cost " + " ".join(shlex.quote(a) for a in shown(argv)), "warmup": args.warmup,
                        "repeats": args.repeats, "seconds": round(time.monotonic() - start)}
    args.json.write_text(json.dumps({"meta": meta, "models": results}, indent=2) + "\n")
    args.markdown.write_text(markdown(meta, results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
