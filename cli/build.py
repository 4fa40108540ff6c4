"""`posexport list` and `posexport build`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from posexport import export, indexshare
from posexport.errors import PosexportError
from posexport.params import parse_options
from posexport.registry import list_encodings

from .common import EXTRA_OPTIONS, build_from_cli, console, graph_options

DEFAULT_OUT = Path("graphs/build")
_opts = graph_options()


def list_command() -> None:
    """Show every encoding with its parameters and defaults."""
    for enc in list_encodings():
        table = Table(title=f"{enc.name} — {enc.summary}", title_justify="left", show_lines=False)
        table.add_column("option")
        table.add_column("default")
        table.add_column("meaning")
        for option, default, meaning in enc.describe_params():
            table.add_row(option, default, meaning)
        console.print(table)


def build_command(
    ctx: typer.Context,
    encoding: str = _opts["encoding"],
    dtype: str = _opts["dtype"],
    opset: int = _opts["opset"],
    source: str = _opts["source"],
    backend: str = _opts["backend"],
    target: str = _opts["target"],
    out: Path = typer.Option(DEFAULT_OUT, "--out", "-o", help="output folder"),
    name: str = typer.Option("", help="file name stem; default: the encoding's name"),
    indexshare_block: bool = typer.Option(False, "--indexshare", help="rope: an N-layer attention block sharing one cos/sin gather, rotation fused into GroupQueryAttention"),
    layers: int = typer.Option(2, help="--indexshare: layers in the block"),
    kv_heads: int = typer.Option(0, help="--indexshare: key/value heads (0: as many as --heads)"),
    unfused: bool = typer.Option(False, help="--indexshare: build the unfused baseline (rotation ops + attention ops) instead"),
) -> None:
    """Build NAME.onnx and its manifest NAME.json. Encoding parameters are options too (--head-dim 64)."""
    if indexshare_block:
        if encoding != "rope":
            raise PosexportError(f"--indexshare: only rope has an IndexShare block, not --encoding {encoding}")
        block = indexshare.build_block(parse_options(list(ctx.args)), layers=layers, kv_heads=kv_heads or None,
                                       dtype=dtype, fused=not unfused, opset=opset)
        onnx_path, json_path = indexshare.save(block, out, name or None)
        m = block.manifest
        console.print(f"wrote {onnx_path} ({m['bytes']:,} bytes, sha256 {m['sha256'][:12]}) and {json_path}")
        return
    artifact = build_from_cli(ctx, encoding, dtype, opset, source, backend, target)
    onnx_path, json_path = export.save(artifact, out, name or None)
    m = artifact.manifest
    console.print(f"wrote {onnx_path} ({m['bytes']:,} bytes, sha256 {m['sha256'][:12]}) and {json_path}")


def register(app: typer.Typer) -> None:
    app.command("list")(list_command)
    app.command("build", context_settings=EXTRA_OPTIONS)(build_command)
