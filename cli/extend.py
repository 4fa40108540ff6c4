"""`posexport extend`: a learned position table (or a learned graph) with more positions."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console


def extend_command(
    source: Path = typer.Argument(..., help="a learned graph (.onnx, manifest beside it) or a weights file (.npy, .safetensors, .pt/.pth/.bin)"),
    to: int = typer.Option(..., "--to", help="rows of the extended table (more than it has)"),
    strategy: str = typer.Option("mean", help="new rows: mean (original rows kept, new ones their mean) or interpolate (the whole table resampled; docs/encodings.md)"),
    key: str = typer.Option(None, help="the table's name inside a safetensors file or state dict"),
    out: Path = typer.Option(None, "--out", "-o", help="output folder; default: beside SOURCE"),
    name: str = typer.Option(None, help="file name stem (no folder: that is --out); default: SOURCE's stem and the new length, e.g. learned-2048"),
) -> None:
    """Write a larger learned table (and graph): the source is never modified."""
    from posexport.extend import extend_file

    for path in extend_file(source, to, strategy, key=key, out=out, name=name):
        console.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command("extend")(extend_command)
