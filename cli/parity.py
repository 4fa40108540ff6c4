"""`posexport parity`: every runtime against the float64 oracle."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from posexport import export, parity
from posexport.errors import PosexportError

from .common import EXTRA_OPTIONS, build_from_cli, console, graph_options

_opts = graph_options()


def parity_command(
    ctx: typer.Context,
    graph: Path = typer.Argument(None, help="a .onnx built by `posexport build` (its manifest beside it)"),
    encoding: str = _opts["encoding"],
    dtype: str = _opts["dtype"],
    opset: int = _opts["opset"],
    source: str = _opts["source"],
    backend: str = _opts["backend"],
    runtimes: str = typer.Option("", help="comma-separated runtimes; default: all"),
    seqs: str = typer.Option("", help="sequence lengths of the sweep, e.g. 1,17,512"),
    batches: str = typer.Option("", help="batch sizes of the sweep, e.g. 1,3"),
    seed: int = typer.Option(0, help="seed of the random inputs"),
    strict: bool = typer.Option(False, help="also fail when a requested runtime is unavailable"),
) -> None:
    """Check a graph (or one built from --encoding and its options) on every runtime."""
    if graph is not None:
        if ctx.args:
            raise PosexportError(f"{ctx.args[0]}: encoding options go with --encoding, not with a built GRAPH")
        artifact = export.load(graph)
    else:
        artifact = build_from_cli(ctx, encoding, dtype, opset, source, backend)
    names = [r for r in runtimes.split(",") if r] or None
    with console.status("running parity…") as status:
        report = parity.run_parity(
            artifact,
            names,
            seqs=parity.parse_ints(seqs, "--seqs"),
            batches=parity.parse_ints(batches, "--batches"),
            seed=seed,
            progress=lambda what: status.update(f"parity: {what}"),
        )
    render(report)
    failed = not report.passed or (strict and report.unavailable)
    raise typer.Exit(1 if failed else 0)


def render(report: parity.Report) -> None:
    m = report.manifest
    table = Table(title=f"{m['encoding']} {m['dtype']} ({m['source']}, {m['backend']})", title_justify="left")
    for col in ("case", "runtime", "status", "max abs", "error", "bound", "smallest passing tol"):
        table.add_column(col)
    for r in report.results:
        c = r.comparison
        style = {"pass": "green", "fail": "red", "error": "red"}[r.status]
        if c is None:
            table.add_row(r.case, r.runtime, f"[{style}]{r.status}[/]", r.message, "", "", "")
        else:
            table.add_row(r.case, r.runtime, f"[{style}]{r.status}[/]", f"{c.max_abs:.2e}", f"{c.normalised:.2e}", f"{c.bound:.1e}", f"{c.normalised:.2e}")
    console.print(table)
    for name, why in report.unavailable.items():
        console.print(f"[yellow]{name} unavailable[/]: {why}")
    n = report.counts()
    verdict = "[green]PASS[/]" if report.passed else "[red]FAIL[/]"
    console.print(f"{verdict}: {n['pass']} passed, {n['fail']} failed, {n['error']} errors, {len(report.unavailable)} runtimes unavailable")


def register(app: typer.Typer) -> None:
    app.command("parity", context_settings=EXTRA_OPTIONS)(parity_command)
