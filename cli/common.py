"""What every command shares: the console, extra-option parsing, and the one-line error path."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

from posexport import export
from posexport.contract import DEFAULT_TARGET
from posexport.params import parse_options

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

# Commands that take an encoding's parameters as free options (--head-dim 64 …).
EXTRA_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}


def build_from_cli(ctx: typer.Context, encoding: str, dtype: str, opset: int, source: str, backend: str,
                   target: str = DEFAULT_TARGET) -> export.Artifact:
    """Build in memory from --encoding and the encoding's own options left in ctx.args."""
    values: dict[str, Any] = parse_options(list(ctx.args))
    return export.build(encoding, values, dtype=dtype, opset=opset, source=source, backend=backend, target=target)


def graph_options() -> dict[str, Any]:
    """Typer option declarations shared by build and parity."""
    return dict(
        encoding=typer.Option("rope", "--encoding", "-e", help="encoding to build (see `posexport list`)"),
        dtype=typer.Option("float32", help="float I/O type: float32, float16 or bfloat16"),
        opset=typer.Option(export.DEFAULT_OPSET, help="ONNX opset (17 or newer)"),
        source=typer.Option("script", help="script (onnxscript function) or torch (torch.onnx dynamo export)"),
        backend=typer.Option("auto", help="rope expression: auto, portable, onnx23 (opset 23+) or ort (com.microsoft contrib op)"),
        target=typer.Option(DEFAULT_TARGET, help="what --backend auto optimises for: onnxruntime (contrib ops allowed) or standard (standard ops of the opset only)"),
    )
