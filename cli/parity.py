"""`posexport parity`: every runtime against the float64 oracle, over the lengths that break deployments."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from posexport import export, parity
from posexport.files import write_output
from posexport.reports import parity as reports
from posexport.errors import PosexportError

from posexport.params import parse_options

from .common import EXTRA_OPTIONS, console, err_console, graph_options

_opts = graph_options()


def parity_command(
    ctx: typer.Context,
    encoding: str = _opts["encoding"],
    dtype: str = typer.Option("float32", help="float I/O type(s) to build and check, comma-separated: float32,float16,bfloat16"),
    opset: int = _opts["opset"],
    source: str = _opts["source"],
    backend: str = _opts["backend"],
    runtimes: str = typer.Option("", help="comma-separated runtimes (torch, reference, ort-cpu, ort-cpu-noopt, ort-cuda, openvino); default: all"),
    seqs: str = typer.Option("", help="sequence lengths of the sweep, e.g. 1,17,512"),
    batches: str = typer.Option("", help="batch sizes of the sweep, e.g. 1,3"),
    seed: int = typer.Option(0, help="seed of the random inputs"),
    tolerance: str = typer.Option("", help="override DESIGN 4.2's bounds: a number, or DTYPE=NUMBER pairs (float16=5e-3)"),
    pairwise: bool = typer.Option(False, "--pairwise", help="also compare every pair of runtimes with each other"),
    properties: bool = typer.Option(True, "--properties/--no-properties", help="check the encoding's mathematical properties on each runtime"),
    details: bool = typer.Option(False, "--details", help="list every case, not only the failing ones"),
    json_out: Path = typer.Option(None, "--json", help="write the report as JSON"),
    junit_out: Path = typer.Option(None, "--junit", help="write the report as JUnit XML (for CI systems)"),
    markdown_out: Path = typer.Option(None, "--markdown", help="write the report as Markdown"),
    save_outputs: Path = typer.Option(None, "--save-outputs", help="write every runtime's outputs to this .npz"),
    load_outputs: Path = typer.Option(None, "--load-outputs", help="judge outputs saved by another run (e.g. a GPU machine) too"),
    strict: bool = typer.Option(False, help="also fail on an unavailable runtime or a known runtime limitation"),
    from_model: Path = typer.Option(None, "--from-model", help="also judge the graph (GRAPH, or every graph of the model) against the model's own code from transformers (runtime hf); see docs/models.md"),
) -> None:
    """Check GRAPH.onnx (built by `posexport build`, its manifest beside it), or graphs built from --encoding
    and its options, on every runtime. Exit 0 only when every case passed."""
    # GRAPH is read from the free arguments: a declared positional would swallow the value of an
    # encoding option (`--head-dim 8`), which click cannot tell apart from a path.
    graph, options = graph_and_options(list(ctx.args))
    if from_model is not None and (options or save_outputs or load_outputs):
        raise PosexportError("--from-model: the model gives the graphs' parameters; drop encoding options, "
                             "--save-outputs and --load-outputs")
    artifacts = None if from_model is not None else chosen_artifacts(graph, options, encoding, dtype, opset, source, backend)
    names = [r for r in runtimes.split(",") if r] or None
    saved = parity.Outputs.load(load_outputs) if load_outputs else None
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("parity", total=None)

        def progress(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=f"parity: {what}")

        settings = dict(
            seqs=parity.parse_ints(seqs, "--seqs"),
            batches=parity.parse_ints(batches, "--batches"),
            seed=seed,
            tolerance=parity.parse_tolerance(tolerance),
            pairwise=pairwise,
            properties=properties,
            progress=progress,
        )
        if artifacts is None:
            from posexport.models.check import run_model_parity

            build = dict(opset=opset, source=source, backend=backend)
            report = run_model_parity(from_model, graph, names, tuple(dtype.split(",")), build, **settings)
        else:
            report = parity.run_parity(artifacts, names, keep_outputs=save_outputs is not None, saved=saved, **settings)
    reports.render_terminal(report, console, details=details)
    if json_out:
        write_output(json_out, reports.to_json(report), "--json")
    if junit_out:
        write_output(junit_out, reports.to_junit(report), "--junit")
    if markdown_out:
        write_output(markdown_out, reports.to_markdown(report), "--markdown")
    if save_outputs:
        report.outputs.save(save_outputs)
    passed = report.strictly_passed() if strict else report.passed
    raise typer.Exit(0 if passed else 1)


def chosen_artifacts(graph: Path | None, options: list[str], encoding: str, dtype: str, opset: int, source: str,
                     backend: str) -> list[export.Artifact]:
    """The built GRAPH, or graphs built from --encoding and its options (one per --dtype)."""
    if graph is not None:
        if options:
            raise PosexportError(f"{options[0]}: encoding options go with --encoding, not with a built GRAPH")
        if dtype != "float32":
            raise PosexportError(f"--dtype {dtype}: a built GRAPH has its own dtype; --dtype goes with --encoding")
        return [export.load(graph)]
    values = parse_options(options)
    return [export.build(encoding, values, dtype=d, opset=opset, source=source, backend=backend) for d in dtype.split(",")]


def graph_and_options(args: list[str]) -> tuple[Path | None, list[str]]:
    if args and not args[0].startswith("-"):
        return Path(args[0]), args[1:]
    return None, args


def register(app: typer.Typer) -> None:
    app.command("parity", context_settings=EXTRA_OPTIONS, options_metavar="[GRAPH.onnx] [OPTIONS]")(parity_command)
