"""`posexport parity`: every runtime against the float64 oracle, over the lengths that break deployments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from .common import BROWSER_HELP, EXTRA_OPTIONS, EncodingHelp, console, graph_options, progress_bar

_opts = graph_options()
TOLERANCE_HELP = ("override the bounds on max|out − ref| / max(1, max|ref|) (docs/numerics.md): a number for every "
                  "dtype, or DTYPE=NUMBER pairs (float16=5e-3,bfloat16=4e-2)")


def parity_command(
    ctx: typer.Context,
    encoding: str = _opts["encoding"],
    dtype: str = _opts["dtype"],
    opset: int = _opts["opset"],
    source: str = _opts["source"],
    backend: str = _opts["backend"],
    target: str = _opts["target"],
    preset: str = _opts["preset"],
    from_config: Path = _opts["from_config"],
    from_model: Path = _opts["from_model"],
    runtimes: str = typer.Option("", help="comma-separated runtimes (torch, reference, ort-cpu, ort-cpu-noopt, ort-cuda, openvino, "
                                 "ort-web-wasm, ort-webgpu); default: all but the browser ones (ort-web-wasm, ort-webgpu)"),
    browser: Path = typer.Option(None, "--browser", help=BROWSER_HELP),
    seqs: str = typer.Option("", help="sequence lengths of the sweep, e.g. 1,17,512"),
    batches: str = typer.Option("", help="batch sizes of the sweep, e.g. 1,3"),
    seed: int = typer.Option(0, help="seed of the random inputs"),
    tolerance: str = typer.Option("", help=TOLERANCE_HELP),
    pairwise: bool = typer.Option(False, "--pairwise", help="also compare every pair of runtimes with each other"),
    properties: bool = typer.Option(True, "--properties/--no-properties", help="check the encoding's mathematical properties on each runtime"),
    details: bool = typer.Option(False, "--details", help="list every case, not only the failing ones"),
    json_out: Path = typer.Option(None, "--json", help="write the report as JSON"),
    junit_out: Path = typer.Option(None, "--junit", help="write the report as JUnit XML (for CI systems)"),
    markdown_out: Path = typer.Option(None, "--markdown", help="write the report as Markdown"),
    save_outputs: Path = typer.Option(None, "--save-outputs", help="write every runtime's outputs to this .npz"),
    load_outputs: Path = typer.Option(None, "--load-outputs", help="judge outputs saved by another run (e.g. a GPU machine) too"),
    strict: bool = typer.Option(False, help="also fail on an unavailable runtime or a known runtime limitation"),
) -> None:
    """Check GRAPH.onnx (built by `posexport build`, its manifest beside it), graphs built from --encoding and its
    options, or --from-model DIR's (also against its own code, docs/models.md) on every runtime. Exit 0 only when every case passed."""
    from posexport.registry import entry

    entry(encoding)  # a mistyped name is answered before torch is imported
    from posexport.files import write_outputs
    from posexport.options import parity_from_options
    from posexport.params import parse_ints, parse_options
    from posexport.verdicts import check_settings, parse_tolerance
    from posexport.reports import parity as reports
    from posexport.verdicts.runners import get_runtimes

    # GRAPH is read from the free arguments: a declared positional would swallow the value of an
    # encoding option (`--head-dim 8`), which click cannot tell apart from a path.
    graph, options = graph_and_options(list(ctx.args))
    written = report_files(json_out, junit_out, markdown_out)
    tolerance_bound = parse_tolerance(tolerance)
    check_settings(tolerance_bound, seed)
    names = [r for r in runtimes.split(",") if r]
    chosen = get_runtimes(names, browser) if browser is not None else names or None
    with progress_bar() as bar:
        task = bar.add_task("parity", total=None)

        def progress(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"parity: {what}")

        run = dict(runtimes=chosen, seqs=parse_ints(seqs, "--seqs"),
                   batches=parse_ints(batches, "--batches"), seed=seed, tolerance=tolerance_bound, pairwise=pairwise,
                   properties=properties, progress=progress, dtype=dtype, opset=opset, source=source, backend=backend, target=target)
        if from_model is not None:
            report = model_report(from_model, graph, options, preset, from_config, save_outputs, load_outputs, run)
        else:
            report = parity_from_options(graph, parse_options(options), encoding=encoding, preset=preset or None,
                                         from_config=from_config, save_outputs=save_outputs, load_outputs=load_outputs, **run)
    reports.render_terminal(report, console, details=details, strict=strict)
    write_outputs([(path, render(report), option) for path, render, option in written])
    raise typer.Exit(0 if (report.strictly_passed() if strict else report.passed) else 1)


def report_files(json_out: Path | None, junit_out: Path | None, markdown_out: Path | None) -> list[tuple[Path, Any, str]]:
    """The reports asked for as (path, renderer, option), each destination checked before the sweep runs."""
    from posexport.files import check_destination
    from posexport.verdicts import to_json
    from posexport.reports import parity as reports

    chosen = [(path, render, option) for path, render, option in (
        (json_out, to_json, "--json"), (junit_out, reports.to_junit, "--junit"), (markdown_out, reports.to_markdown, "--markdown"),
    ) if path]
    for path, _, option in chosen:
        check_destination(path, option)
    return chosen


def model_report(folder: Path, graph: Path | None, options: list[str], preset: str, from_config: Path | None,
                 save_outputs: Path | None, load_outputs: Path | None, run: dict):
    """parity --from-model: options that make no sense with a model are refused by the library."""
    from posexport.verdicts.from_model import parity_from_model

    conflicts = {"--preset": preset, "--from-config": from_config, "--save-outputs": save_outputs,
                 "--load-outputs": load_outputs, **{option: True for option in options[:1]}}
    return parity_from_model(folder, graph, conflicts, **run)


def graph_and_options(args: list[str]) -> tuple[Path | None, list[str]]:
    if args and not args[0].startswith("-"):
        return Path(args[0]), args[1:]
    return None, args


def register(app: typer.Typer) -> None:
    app.command("parity", cls=EncodingHelp, context_settings=EXTRA_OPTIONS,
                options_metavar="[GRAPH.onnx] [OPTIONS]")(parity_command)
