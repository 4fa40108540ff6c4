"""What every command shares: the consoles, the progress bar, the options of build and parity, and a
--help that lists the chosen encoding's own options. Light on purpose: nothing here imports torch, onnx or
onnxscript."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterable, Iterator
from typing import IO, Any

import click
import typer
from rich.console import Console, ConsoleDimensions
from rich.segment import Segment
from typer.core import TyperCommand

from posexport.reports.escape import terminal_text

# Wider than any row a report prints: in a pipe or a CI log a table is laid out at its natural width.
PIPED_WIDTH = 100_000


class Output(Console):
    """rich's console at the terminal's width on a terminal; anywhere else (a pipe, a file, a CI log) wide
    enough that no table wraps or cuts a cell (rich would otherwise assume 80 columns). What it shows has
    every control character dropped (a model's or output's name, an error quoting one), so no input moves
    the cursor, clears the screen or retitles the window; rich's own styles and cursor moves are kept."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        return size if self.is_terminal else ConsoleDimensions(PIPED_WIDTH, size.height)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(segment if segment.control else Segment(terminal_text(segment.text), *segment[1:])
                                      for segment in buffer)


console = Output(soft_wrap=True)
err_console = Output(stderr=True, soft_wrap=True)


def progress_bar() -> Any:
    """A transient rich Progress on stderr, shown only when stderr is a terminal (never in a pipe or a log)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=err_console, transient=True, disable=not err_console.is_terminal)


class LastLine(io.StringIO):
    """What `--quiet` makes of the console's stream: everything is held, and only the last line is shown."""

    def __init__(self, shown: IO[str]) -> None:
        super().__init__()
        self.shown = shown


def keep_last_line() -> None:
    if not isinstance(console.file, LastLine):
        console.file = LastLine(console.file)


@contextlib.contextmanager
def show_last_line() -> Iterator[None]:
    """Around a command: under --quiet, its last line of output is written when it ends, however it ends."""
    try:
        yield
    finally:
        held = console.file
        if isinstance(held, LastLine):
            console.file = held.shown
            lines = [line for line in held.getvalue().splitlines() if line.strip()]
            if lines:
                held.shown.write(lines[-1] + "\n")


def require(module: str, option: str, extra: str) -> None:
    """An optional dependency that ``option`` needs, checked before any work starts: one error line naming
    the install command when it is missing."""
    import importlib.util

    from posexport.errors import PosexportError

    if importlib.util.find_spec(module) is None:
        raise PosexportError(f"{option} needs {module}, which is not installed: pip install 'posexport[{extra}]'")


# Commands that take an encoding's parameters as free options (--head-dim 64 …).
EXTRA_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}
BROWSER_HELP = ("the Chromium or Chrome binary that ort-webgpu and ort-web-wasm drive (default: chromium on PATH); "
                "a browser with a real GPU gives ort-webgpu that GPU's adapter")
DEFAULT_ENCODING = "rope"


def complete_encodings(incomplete: str) -> list[str]:
    """Shell completion of --encoding: the registry's names (typer's completion, `posexport --install-completion`)."""
    from posexport.registry import ENCODINGS

    return [name for name in ENCODINGS if name.startswith(incomplete)]


def complete_presets(incomplete: str) -> list[str]:
    from posexport.rope.config import preset_names

    return [name for name in preset_names() if name.startswith(incomplete)]


def graph_options() -> dict[str, Any]:
    """Typer option declarations shared by build and parity."""
    from posexport.contract import DEFAULT_OPSET, DEFAULT_TARGET  # numpy: not needed by `posexport --help`

    return dict(
        encoding=typer.Option(DEFAULT_ENCODING, "--encoding", "-e", help="encoding to build (see `posexport list`; its options: `--encoding NAME --help`)",
                              autocompletion=complete_encodings),
        dtype=typer.Option("float32", help="float I/O type(s), comma-separated: float32, float16, bfloat16 (one graph each; build names them NAME-DTYPE)"),
        opset=typer.Option(DEFAULT_OPSET, help="ONNX opset (17 or newer)"),
        source=typer.Option("script", help="script (onnxscript function) or torch (torch.onnx dynamo export)"),
        backend=typer.Option("auto", help="rope expression: auto, portable, onnx23 (opset 23+) or ort (com.microsoft contrib op)"),
        target=typer.Option(DEFAULT_TARGET, help="what --backend auto optimises for: onnxruntime (contrib ops allowed) or standard (standard ops of the opset only)"),
        preset=typer.Option("", help="rope of a well-known model (see `posexport list`); options given override its values",
                            autocompletion=complete_presets),
        from_config=typer.Option(None, "--from-config", help="rope of a model's config.json; options given override its values"),
        from_model=typer.Option(None, "--from-model", help="a model folder (config.json + weights): every positional encoding it uses, read as transformers reads it (docs/models.md)"),
    )


def encoding_in(args: list[str]) -> str | None:
    """The encoding a command line names (--encoding NAME, -e NAME, --encoding=NAME), or None."""
    for i, arg in enumerate(args):
        if arg.startswith("--encoding="):
            return arg.partition("=")[2]
        if arg in ("--encoding", "-e") and i + 1 < len(args):
            return args[i + 1]
    return None


def print_encoding_options(name: str | None, command: str) -> None:
    """The named encoding's parameters as a table (option, default, meaning); without a name, how to see them.
    Only a named encoding is loaded: `posexport build --help` imports neither torch nor onnxscript."""
    from rich.markup import escape
    from rich.table import Table

    from posexport.registry import ENCODINGS, get_encoding, summary

    if name is None:
        console.print(f"Each encoding's own options (--head-dim 64 …): `{command} --encoding "
                      f"NAME --help`, NAME one of {', '.join(ENCODINGS)} (default {DEFAULT_ENCODING}).", highlight=False)
        return
    enc = get_encoding(name)
    table = Table(title=f"{name} options — {summary(name)}", title_justify="left")
    table.add_column("option", no_wrap=True)
    table.add_column("default", no_wrap=True)
    table.add_column("meaning")
    for option, default, meaning in enc.describe_params():
        table.add_row(option, escape(default), escape(meaning))  # help texts hold [shapes], not markup
    console.print(table)


class ExtraOptions(TyperCommand):
    """A command that takes free options (an encoding's parameters, rope's): one that nothing takes is answered
    with the nearest of the library's options and the command's own (`--runtime` → did you mean --runtimes?)."""

    def invoke(self, ctx: click.Context) -> Any:
        from posexport.errors import PosexportError, UnknownOption

        try:
            return super().invoke(ctx)
        except UnknownOption as e:
            own = [o for p in self.params for o in getattr(p, "opts", ()) if o.startswith("--")]
            if e.option in own:  # a real option of the command, given where it does not belong
                raise
            raise PosexportError(e.line(own)) from None


class EncodingHelp(ExtraOptions):
    """A command whose --help ends with the options of the encoding its command line names."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["encoding"] = encoding_in(args)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        print_encoding_options(ctx.meta.get("encoding"), ctx.command_path)


# Exceptions a library raises on a malformed input file (not a bug in posexport), by class name so that
# none of those libraries is imported here: what each means, as the one line an `error:` shows.
INPUT_ERRORS = {
    "ValidationError": "the model is not valid ONNX",  # onnx.checker
    "DecodeError": "the file is not a valid protobuf",  # google.protobuf
    "RecursionError": "the input is nested too deeply to read",
    # torch.load(weights_only=True) under transformers (--against-hf): a checkpoint that needs code
    "UnpicklingError": "a checkpoint is a pickle that needs code to load it, which posexport never runs; where you "
                       "trust its source, save its tensors with safetensors.torch.save_file",
}


def input_error(error: BaseException) -> str | None:
    """The one line for a library's refusal of a bad input file, or None for anything else."""
    from posexport.errors import one_line

    meaning = INPUT_ERRORS.get(type(error).__name__)
    return None if meaning is None else f"{meaning} ({one_line(error, 300)})"
