"""`posexport list` and `posexport build`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from .common import EXTRA_OPTIONS, EncodingHelp, console, graph_options

DEFAULT_OUT = Path("graphs/build")
_opts = graph_options()
JSON_HELP = "also write what was done as JSON to this file (docs/schemas/, docs/ci.md)"


def list_command(
    models: bool = typer.Option(False, "--models", help="show the model catalogue of --from-model: each model_type and the encodings built for it"),
    json_out: Path = typer.Option(None, "--json", help=JSON_HELP),
) -> None:
    """Show every encoding and the rope presets (an encoding's options: `posexport build --encoding NAME --help`)."""
    from posexport.api import listing

    if json_out:
        from posexport.files import check_destination

        check_destination(json_out, "--json")
    found = listing(models=models)
    if models:
        console.print(titled("models — `posexport build --from-model DIR` (docs/models.md)", ("model_type", "encodings"),
                             ((e["model_type"], e["encodings"]) for e in found["models"])))
        unknown = found["unknown_types"]
        console.print(f"{found['versions']}; " + ("transformers is not installed" if unknown is None else
                      f"{len(unknown)} of its model types {'is' if len(unknown) == 1 else 'are'} unknown to posexport's "
                      f"catalogue{': ' + ', '.join(unknown) if unknown else ''}"))
    else:
        console.print(titled("encodings — `posexport build --encoding NAME [--help]`", ("encoding", "what it is"),
                             ((e["name"], e["summary"]) for e in found["encodings"])))
        console.print(titled("presets — `posexport build --preset NAME`", ("preset", "scaling", "model config it follows"),
                             ((r["name"], r["scaling"], r["follows"]) for r in found["presets"])))
    write_json(json_out, found)


def titled(title: str, columns: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> Table:
    """A listing's table, its cells shown as written (no rich markup)."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(str(cell)) for cell in row))
    return table


def write_json(path: Path | None, data: dict[str, Any]) -> None:
    if path:
        from posexport.files import write_output

        write_output(path, json.dumps(data, indent=2, sort_keys=True) + "\n", "--json")


def build_command(
    ctx: typer.Context,
    encoding: str = _opts["encoding"],
    dtype: str = _opts["dtype"],
    opset: int = _opts["opset"],
    source: str = _opts["source"],
    backend: str = _opts["backend"],
    target: str = _opts["target"],
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o", help="output folder (NAME.onnx and NAME.json go in it)"),
    name: str = typer.Option(None, help="file name stem (no folder: that is --out); default: the preset's name, the config's "
                                        "or model's folder name and the encoding (MODEL-rope), or the encoding's name"),
    preset: str = _opts["preset"],
    from_config: Path = _opts["from_config"],
    from_model: Path = _opts["from_model"],
    indexshare: bool = typer.Option(False, "--indexshare", help="rope: an N-layer attention block sharing one cos/sin gather, rotation fused into GroupQueryAttention"),
    layers: int = typer.Option(2, help="--indexshare: layers in the block"),
    kv_heads: int = typer.Option(0, help="--indexshare: key/value heads (0: as many as --heads)"),
    unfused: bool = typer.Option(False, help="--indexshare: build the unfused baseline (rotation ops + attention ops) instead"),
    json_out: Path = typer.Option(None, "--json", help=JSON_HELP),
) -> None:
    """Build NAME.onnx and its manifest NAME.json. Encoding parameters are options too (--head-dim 64,
    --causal/--no-causal); with --preset or --from-config they override the config's values; --from-model
    builds every encoding of a model folder (docs/models.md)."""
    from posexport.files import check_destination, check_out_folder, check_stem
    from posexport.registry import entry

    entry(encoding)  # a mistyped name is answered before torch is imported
    if name is not None:  # before a build that may take a while
        check_stem(name)
    check_out_folder(out)
    if json_out:
        check_destination(json_out, "--json")
    from posexport.params import parse_options

    if from_model is not None:
        from posexport.models.cli import build, lines

        explicit = ctx.get_parameter_source("encoding").name != "DEFAULT"
        conflicts = {"--preset": preset, "--from-config": from_config, "--indexshare": indexshare}
        report = build(from_model, encoding if explicit else None, parse_options(list(ctx.args)), out, name,
                       conflicts, dtype=dtype, opset=opset, source=source, backend=backend, target=target)
        for line in lines(report):
            console.print(line, highlight=False, markup=False)
    else:
        from posexport.options import build_from_options

        built = build_from_options(
            encoding, parse_options(list(ctx.args)), preset=preset or None, from_config=from_config,
            indexshare=indexshare, layers=layers, kv_heads=kv_heads or None, unfused=unfused,
            dtype=dtype, opset=opset, source=source, backend=backend, target=target,
        )
        report = built.save_report(out, name)
        for graph in report["graphs"]:
            console.print(f"wrote {graph['onnx']} ({graph['bytes']:,} bytes, sha256 {graph['sha256'][:12]}) and {graph['manifest']}",
                          highlight=False, markup=False)
    write_json(json_out, report)


def register(app: typer.Typer) -> None:
    app.command("list")(list_command)
    app.command("build", cls=EncodingHelp, context_settings=EXTRA_OPTIONS)(build_command)
