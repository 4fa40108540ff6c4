"""`posexport bench`: time backends against a copy of the same tensor (posexport.bench does the work,
posexport.reports.bench renders it). Library modules are imported when the command runs."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import BROWSER_HELP, EXTRA_OPTIONS, ExtraOptions, console, progress_bar, require


def bench_command(
    ctx: typer.Context,
    encodings: str = typer.Option("rope", help="comma-separated encodings"),
    backends: str = typer.Option("auto,portable,onnx23,ort", help="comma-separated rope backends (other encodings: portable)"),
    runtimes: str = typer.Option("ort-cpu", help="comma-separated runtimes (ort-cpu, ort-cuda, openvino, reference, torch; see `posexport parity --help`); unavailable ones are skipped"),
    browser: Path = typer.Option(None, "--browser", help=BROWSER_HELP),
    dtypes: str = typer.Option("float32", help="comma-separated: float32, float16, bfloat16"),
    seqs: str = typer.Option("", help="sequence lengths, e.g. 128,512,2048 (default 2048; with --model: 512,2048)"),
    layouts: str = typer.Option("", help="rope: comma-separated x layouts to time, each in its own groups (bsh, bshd, bhsd); default: --layout's"),
    decode_positions: str = typer.Option("", help="rope: also time a decode step (one token) at each of these positions, e.g. 1000,100000 (with --model: one token after that many cached ones; default the longest --seqs)"),
    batch: int = typer.Option(1, help="batch size"),
    threads: int = typer.Option(1, min=1, help="intra-op threads for every runtime and torch (fixed, reported)"),
    warmup: int = typer.Option(5, min=0, help="untimed runs first"),
    repeats: int = typer.Option(30, min=3, help="timed runs; the median is reported"),
    indexshare_layers: int = typer.Option(0, min=0, help="also time the IndexShare block with this many layers against the unfused one (0: skip)"),
    indexshare_seqs: str = typer.Option("", help="sequence lengths for the IndexShare block (prompt of that length, decode after it); default: --seqs"),
    profile: bool = typer.Option(False, help="add onnxruntime's per-op profile of each graph"),
    target: str = typer.Option("onnxruntime", help="what `auto` optimises for: onnxruntime or standard"),
    json_out: Path = typer.Option(None, "--json", help="write the result as JSON"),
    markdown_out: Path = typer.Option(None, "--markdown", help="write the result as Markdown (with the command and the machine load)"),
    plot_out: Path = typer.Option(None, "--plot", help="write a PNG: time and ratio to copy against sequence length"),
    model: Path = typer.Option(None, "--model", help="a whole model (e.g. a patched one) to time against --against instead of built graphs"),
    against: Path = typer.Option(None, "--against", help="with --model: the model it is compared with (e.g. the original)"),
    dim: list[str] = typer.Option([], "--dim", help="with --model: size of a symbolic input dimension, NAME=N (repeatable)"),
    timeout: float = typer.Option(None, "--timeout", help="with --model: seconds each call's warm-up and timed runs may take "
                                  "together (default 600); past them the call's process is killed and its row says so"),
) -> None:
    """Time every backend, with a plain copy (the memory-bound limit), the naive tutorial export, the
    contrib op with a full precomputed cache and PyTorch eager in every table, round-robin. Encoding
    parameters are options too (--heads 32 --head-dim 128). With --model FIXED --against ORIGINAL: the two
    whole models' prompts and decode steps, interleaved, their ratios and file sizes."""
    if model is not None or against is not None:
        return models_command(model, against, seqs, decode_positions, threads, warmup, repeats, json_out, markdown_out, dim, timeout)
    from posexport.bench import run_from_options
    from posexport.reports.bench import render_terminal, write_reports

    if plot_out:
        require("matplotlib", "--plot", "plot")

    with progress_bar() as bar:
        task = bar.add_task("bench", total=None)
        result = run_from_options(
            ctx.args, progress=lambda label, done, total: bar.update(task, description=label, completed=done, total=total),
            encodings=encodings, backends=backends, runtimes=runtimes, browser=str(browser or ""), dtypes=dtypes, seqs=seqs, layouts=layouts,
            decode_positions=decode_positions, batch=batch, threads=threads,
            warmup=warmup, repeats=repeats, indexshare_layers=indexshare_layers, indexshare_seqs=indexshare_seqs, profile=profile,
            target=target,
        )
    render_terminal(result, console)
    write_reports(result, json_out, markdown_out, plot_out)


def models_command(model: Path | None, against: Path | None, seqs: str, decode_positions: str, threads: int, warmup: int,
                   repeats: int, json_out: Path | None, markdown_out: Path | None, dim: list[str], timeout: float | None) -> None:
    """`posexport bench --model FIXED --against ORIGINAL` (posexport.bench.models)."""
    from posexport.bench.models import bench_models, positions
    from posexport.errors import PosexportError
    from posexport.reports.model_bench import render_terminal, write_reports
    from posexport.contract import DEFAULT_TIMEOUT

    from .surgery import parse_dims

    if model is None or against is None:
        raise PosexportError("--model and --against go together: time a patched model against its original")
    prompts = positions(seqs, "--seqs", (512, 2048))
    result = bench_models(model, against, prompts, positions(decode_positions, "--decode-positions", (max(prompts),)),
                          threads, warmup, repeats, dims=parse_dims(dim), timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
    render_terminal(result, console)
    write_reports(result, json_out, markdown_out)


def register(app: typer.Typer) -> None:
    app.command("bench", cls=ExtraOptions, context_settings=EXTRA_OPTIONS)(bench_command)
