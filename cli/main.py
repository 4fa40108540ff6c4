"""Entry point: assembles the commands and turns every user error into one line and a non-zero exit."""

from __future__ import annotations

import sys

import typer

from posexport.errors import PosexportError

from . import bench, build, extend, parity
from .common import err_console

app = typer.Typer(
    help="Positional encodings as ONNX graphs: build, check parity on every runtime, benchmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
build.register(app)
extend.register(app)
parity.register(app)
bench.register(app)


def main() -> None:
    args = sys.argv[1:] or ["--help"]
    try:
        code = app(args, prog_name="posexport", standalone_mode=False)
    except PosexportError as e:
        err_console.print(f"error: {e}", highlight=False, markup=False)
        sys.exit(2)
    except typer.TyperException as e:  # a usage error: unknown option, a value of the wrong type
        ctx = getattr(e, "ctx", None)
        command = ctx.command_path if ctx else "posexport"
        err_console.print(f"error: {e.format_message()} (see `{command} --help`)", highlight=False, markup=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
