"""Entry point: assembles the commands and turns every user error into one line and a non-zero exit.

A command's module is imported only when that command runs (or shows its own --help), so
`posexport --help` loads none of them and `posexport list` only the light ones.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator

import click
import typer
from typer.core import TyperGroup

from posexport.errors import PosexportError
from posexport.files import inputs_guarded

from .common import console, err_console, input_error, keep_last_line, show_last_line

# command -> (module of this package that registers it, the line `posexport --help` shows for it)
COMMANDS = {
    "list": ("build", "Show every encoding and the rope presets."),
    "build": ("build", "Build NAME.onnx and its manifest NAME.json."),
    "extend": ("extend", "Write a larger learned table (and graph): the source is never modified."),
    "parity": ("parity", "Check built graphs on every runtime against the float64 oracle."),
    "bench": ("bench", "Time every backend against a plain copy, the naive export and PyTorch eager."),
    "doctor": ("surgery", "Find the positional-encoding sites of any exported model and their faults."),
    "patch": ("surgery", "Replace those sites with posexport's exact maths; nothing else changes."),
    "model-parity": ("surgery", "Whole-model parity (also `parity --model`): a model against its original or transformers in float64."),
    "env": ("env", "Show the versions and runtimes posexport runs with, for a bug report."),
}


OUTPUT_OPTIONS = ("verbose", "quiet")


class LazyCommands(TyperGroup):
    """Commands loaded from their module on first use; the command list shows their one-line help."""

    listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, summary = COMMANDS[name]
        if self.listing:
            return click.Command(name, help=summary)
        commands = typer.Typer()
        importlib.import_module(f"{__package__}.{module}").register(commands)
        command = typer.main.get_group(commands).commands[name]
        # --verbose and --quiet after the command's name too: `posexport build … --quiet`
        command.params.extend(p for p in ctx.find_root().command.params if p.name in OUTPUT_OPTIONS)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]):
        # `parity --model M --against O` is whole-model parity: one verb for both kinds of parity.
        if args and args[0] == "parity" and any(a == "--model" or a.startswith("--model=") for a in args[1:]):
            args = ["model-parity", *args[1:]]
        if args and args[0] not in COMMANDS and not args[0].startswith("-"):
            from posexport.errors import not_one_of

            ctx.fail(f"{args[0]!r}: {not_one_of(args[0], list(COMMANDS), 'command')}")
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


def show_warnings(verbose: bool) -> None:
    if verbose:
        warnings.simplefilter("default")
        logging.lastResort.setLevel(logging.WARNING)
        for name in LIBRARY_QUIET:
            os.environ.pop(name, None)
        if hf_logging := sys.modules.get("transformers.utils.logging"):
            hf_logging.enable_progress_bar()
            hf_logging.set_verbosity_warning()


def quiet_output(value: bool) -> None:
    if value:
        keep_last_line()


def show_version(value: bool) -> None:
    if value:
        from posexport import __version__

        console.print(f"posexport {__version__}", highlight=False)
        raise typer.Exit(0)


app = typer.Typer(
    cls=LazyCommands,
    help="Positional encodings as ONNX graphs: build, check parity on every runtime, benchmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def commands(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=show_version, help="show the version and exit"),
    verbose: bool = typer.Option(False, "--verbose", callback=show_warnings, expose_value=False,
                                 help="show the warnings and logs Python, torch, onnx and transformers emit (hidden by default)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", callback=quiet_output, expose_value=False,
                               help="print only the last line (the verdict, or what was written) and errors"),
) -> None:
    """Positional encodings as ONNX graphs: build, check parity on every runtime, benchmark."""


# Library chatter a user did not ask for: transformers' progress bars ("Loading weights") and advisory logs.
LIBRARY_QUIET = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


@contextlib.contextmanager
def transformers_quiet() -> Iterator[None]:
    """LIBRARY_QUIET for one command, then everything as it was: in the environment, read when transformers
    is first imported, and through its API when it already is (the CLI also runs in-process in tests).
    A variable the user set is kept; --verbose turns the chatter back on."""
    saved = {name: os.environ.get(name) for name in LIBRARY_QUIET}
    for name, value in LIBRARY_QUIET.items():
        os.environ.setdefault(name, value)
    hf_logging = sys.modules.get("transformers.utils.logging")
    before = (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()) if hf_logging else None
    if hf_logging:
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if hf_logging := sys.modules.get("transformers.utils.logging"):
            bars, verbosity = before or (True, hf_logging.WARNING)
            (hf_logging.enable_progress_bar if bars else hf_logging.disable_progress_bar)()
            hf_logging.set_verbosity(verbosity)


class Terminated(BaseException):
    """SIGTERM or SIGHUP (a closed terminal), raised like Ctrl-C's KeyboardInterrupt so that writers remove
    their temporaries and the runtimes' processes are ended (posexport.runtimes.isolated) on the way out."""


UNWINDING = (signal.SIGTERM, signal.SIGHUP)


def terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def quiet_and_interruptible() -> Iterator[None]:
    """Library warnings (numpy casts, torch, onnx) stay off stderr, so an error is the only line a user
    sees; SIGTERM and SIGHUP unwind like Ctrl-C. Both are undone afterwards (the CLI also runs in-process in tests)."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, terminate) for sig in UNWINDING} if in_main_thread else {}
    last_resort = logging.lastResort.level if logging.lastResort else None
    try:
        with warnings.catch_warnings():
            if not sys.warnoptions:  # python -W … asks for them
                warnings.simplefilter("ignore")
            if logging.lastResort:  # records of loggers nobody configured
                logging.lastResort.setLevel(logging.ERROR)
            yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if logging.lastResort:
            logging.lastResort.setLevel(last_resort)


def usage_error(error: typer.TyperException) -> str:
    """click's message for a usage error; an unknown option names the one most likely meant (click's
    NoSuchOption, from typer's own copy of click: told apart by its fields)."""
    from posexport.errors import closest

    option, possibilities = getattr(error, "option_name", None), getattr(error, "possibilities", None)
    if option and possibilities is not None and getattr(error, "message", "").startswith("No such option"):
        guess = closest(option, possibilities)
        return f"{option}: no such option" + (f"; did you mean {guess}?" if guess else "")
    return error.format_message()


def main() -> None:
    args = sys.argv[1:] or ["--help"]
    try:
        with quiet_and_interruptible(), transformers_quiet(), show_last_line(), inputs_guarded():
            code = app(args, prog_name="posexport", standalone_mode=False)
    except PosexportError as e:
        err_console.print(f"error: {e}", highlight=False, markup=False)
        sys.exit(2)
    except typer.TyperException as e:  # a usage error: unknown option, a value of the wrong type
        ctx = getattr(e, "ctx", None)
        command = ctx.command_path if ctx else "posexport"
        err_console.print(f"error: {usage_error(e)} (see `{command} --help`)", highlight=False, markup=False)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Terminated as e:
        sys.exit(128 + e.args[0])
    except Exception as e:  # a library's refusal of a bad input file is one line too; anything else is a bug
        line = input_error(e)
        if line is None:
            raise
        err_console.print(f"error: {line}", highlight=False, markup=False)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
