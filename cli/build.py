"""`posexport list` and `posexport build`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from posexport import export
from posexport.rope import config, indexshare
from posexport.errors import PosexportError
from posexport.params import parse_options
from posexport.registry import list_encodings, summary

from .common import EXTRA_OPTIONS, console, graph_options

DEFAULT_OUT = Path("graphs/build")
_opts = graph_options()


def list_command() -> None:
    """Show every encoding with its parameters and defaults."""
    for enc in list_encodings():
        table = Table(title=f"{enc.name} — {summary(enc.name)}", title_justify="left", show_lines=False)
        table.add_column("option")
        table.add_column("default")
        table.add_column("meaning")
        for option, default, meaning in enc.describe_params():
            table.add_row(option, escape(default), escape(meaning))  # help texts hold [shapes], not markup
        console.print(table)
    presets = Table(title="presets — `posexport build --preset NAME`", title_justify="left")
    for column in ("preset", "scaling", "model config it follows"):
        presets.add_column(column)
    for row in config.describe_presets():
        presets.add_row(*row)
    console.print(presets)


def build_command(
    ctx: typer.Context,
    encoding: str = _opts["encoding"],
    dtype: str = _opts["dtype"],
    opset: int = _opts["opset"],
    source: str = _opts["source"],
    backend: str = _opts["backend"],
    target: str = _opts["target"],
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o", help="output folder"),
    name: str = typer.Option("", help="file name stem; default: the preset's or the encoding's name"),
    preset: str = typer.Option("", help="rope of a well-known model (see `posexport list`)"),
    from_config: Path = typer.Option(None, "--from-config", help="rope of a model's config.json"),
    from_model: Path = typer.Option(None, "--from-model", help="every positional encoding of a model folder (config.json + weights), read as transformers reads it; see docs/models.md"),
    indexshare_block: bool = typer.Option(False, "--indexshare", help="rope: an N-layer attention block sharing one cos/sin gather, rotation fused into GroupQueryAttention"),
    layers: int = typer.Option(2, help="--indexshare: layers in the block"),
    kv_heads: int = typer.Option(0, help="--indexshare: key/value heads (0: as many as --heads)"),
    unfused: bool = typer.Option(False, help="--indexshare: build the unfused baseline (rotation ops + attention ops) instead"),
) -> None:
    """Build NAME.onnx and its manifest NAME.json. Encoding parameters are options too (--head-dim 64);
    with --preset or --from-config they override the config's values."""
    values = parse_options(list(ctx.args))
    if from_model:
        from posexport.models import cli as model_cli

        explicit = ctx.get_parameter_source("encoding").name != "DEFAULT"
        for line in model_cli.build(from_model, encoding if explicit else None, values, out, name or None,
                                    conflicts={"--preset": preset, "--from-config": from_config, "--indexshare": indexshare_block},
                                    dtype=dtype, opset=opset, source=source, backend=backend, target=target):
            console.print(line, highlight=False, markup=False)
        return
    if preset or from_config:
        values = {**(config.from_preset(preset) if preset else config.from_config_file(from_config)), **values}
        encoding, name = "rope", name or preset
    if indexshare_block:
        if encoding != "rope":
            raise PosexportError(f"--indexshare: only rope has an IndexShare block, not --encoding {encoding}")
        block = indexshare.build_block(values, layers=layers, kv_heads=kv_heads or None,
                                       dtype=dtype, fused=not unfused, opset=opset)
        onnx_path, json_path = indexshare.save(block, out, name or None)
        m = block.manifest
        console.print(f"wrote {onnx_path} ({m['bytes']:,} bytes, sha256 {m['sha256'][:12]}) and {json_path}")
        return
    artifact = export.build(encoding, values, dtype=dtype, opset=opset, source=source, backend=backend, target=target)
    onnx_path, json_path = export.save(artifact, out, name or None)
    m = artifact.manifest
    console.print(f"wrote {onnx_path} ({m['bytes']:,} bytes, sha256 {m['sha256'][:12]}) and {json_path}")


def register(app: typer.Typer) -> None:
    app.command("list")(list_command)
    app.command("build", context_settings=EXTRA_OPTIONS)(build_command)
