"""`posexport bench`: time backends against a copy of the same tensor (posexport.bench does the work)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from posexport import bench
from posexport.params import parse_options
from posexport.parity import parse_ints

from .common import EXTRA_OPTIONS, console


def split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def bench_command(
    ctx: typer.Context,
    encodings: str = typer.Option("rope", help="comma-separated encodings"),
    backends: str = typer.Option("auto,portable,onnx23,ort", help="comma-separated rope backends (other encodings: portable)"),
    runtimes: str = typer.Option("ort-cpu", help="ort-cpu and/or ort-cuda (IOBinding on the device); absent ones are skipped"),
    dtypes: str = typer.Option("float32", help="comma-separated: float32, float16, bfloat16"),
    seqs: str = typer.Option("2048", help="sequence lengths, e.g. 128,512,2048"),
    batch: int = typer.Option(1, help="batch size"),
    threads: int = typer.Option(1, min=1, help="intra-op threads for onnxruntime and torch (fixed, reported)"),
    warmup: int = typer.Option(5, min=0, help="untimed runs first"),
    repeats: int = typer.Option(30, min=3, help="timed runs; the median is reported"),
    indexshare_layers: int = typer.Option(0, min=0, help="also time the IndexShare block with this many layers against the unfused one (0: skip)"),
    indexshare_seqs: str = typer.Option("", help="sequence lengths for the IndexShare block (prompt of that length, decode after it); default: --seqs"),
    profile: bool = typer.Option(False, help="add onnxruntime's per-op profile of each graph"),
    target: str = typer.Option("onnxruntime", help="what `auto` optimises for: onnxruntime or standard"),
    json_out: Path = typer.Option(None, "--json", help="write the result as JSON"),
    markdown_out: Path = typer.Option(None, "--markdown", help="write the result as Markdown (with the command and the machine load)"),
    plot_out: Path = typer.Option(None, "--plot", help="write a PNG: time and ratio to copy against sequence length"),
) -> None:
    """Time every backend, with a plain copy (the memory-bound limit), the naive tutorial export and
    PyTorch eager in every table. Encoding parameters are options too (--heads 32 --head-dim 128)."""
    params = parse_options(list(ctx.args))
    names = split(encodings)
    bench.check_params(names, params)
    cfg = bench.BenchConfig(
        encodings=names, params=params, backends=split(backends), runtimes=split(runtimes), dtypes=split(dtypes),
        seqs=parse_ints(seqs, "--seqs") or (2048,), batch=batch, threads=threads, warmup=warmup, repeats=repeats,
        indexshare_layers=indexshare_layers, indexshare_seqs=parse_ints(indexshare_seqs, "--indexshare-seqs") or (), profile=profile, target=target,
    )
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("bench", total=None)
        result = bench.run_bench(cfg, progress=lambda label, done, total: bar.update(task, description=label, completed=done, total=total))
    render(result)
    if json_out:
        bench.write(json_out, result.to_json().encode())
    if markdown_out:
        bench.write(markdown_out, bench.markdown(result, bench.graph_size_note() if "rope" in names else None).encode())
    if plot_out:
        bench.plot(result, plot_out)


def render(result: bench.BenchResult) -> None:
    m = result.meta
    console.print(f"threads {m['threads']}, load average {m['load_average']}, median of {m['repeats']} after {m['warmup']} warm-up runs")
    table = Table(title_justify="left")
    for col in ("encoding", "runtime", "dtype", "seq", "subject", "median ms", "IQR ms", "× copy", "note"):
        table.add_column(col)
    for r in result.rows:
        table.add_row(r.encoding, r.runtime, r.dtype, str(r.seq), r.subject, bench.fmt(r.median_ms), bench.fmt(r.iqr_ms),
                      bench.fmt(r.ratio_to_copy, 2), r.note)
    console.print(table)
    for runtime, why in m.get("skipped_runtimes", {}).items():
        console.print(f"[yellow]{runtime} skipped[/]: {why}")
    for t in result.targets:
        verdict = "[green]met[/]" if t["met"] else f"[red]missed[/] ({t['miss']})"
        console.print(f"target {t['target']}: {t['measured']} — {verdict}")


def register(app: typer.Typer) -> None:
    app.command("bench", context_settings=EXTRA_OPTIONS)(bench_command)
