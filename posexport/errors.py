"""The one exception type users see: its message is a single line saying what was wrong and how to fix it, and
for a mistyped name the name most likely meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` with its lines joined by "; " (a library's multi-line message, say), so that an error
    stays one line; cut to ``limit`` characters when given."""
    joined = "; ".join(line.strip() for line in str(text).splitlines() if line.strip())
    return joined if limit is None else joined[:limit]


class PosexportError(Exception):
    """A problem with the user's input or environment (not a bug in posexport). The message is kept on
    one line whatever it quotes."""

    def __init__(self, message: object = ""):
        super().__init__(one_line(str(message)))


class ParamError(PosexportError, ValueError):
    """An encoding parameter is out of range; the message names the parameter and what it accepts
    (``name``, ``value`` and ``allowed`` are kept, so a caller can say where the value came from)."""

    def __init__(self, name: str, value: object, allowed: str):
        self.name, self.value, self.allowed = name, value, allowed
        shown = repr(value)
        if len(shown) > 80 and not isinstance(value, str):  # a 300-digit number; paths stay whole
            shown = f"{shown[:40]}…{shown[-12:]} ({len(shown)} characters)"
        super().__init__(f"--{name.replace('_', '-')} {shown}: {allowed}")


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice ``name`` was most likely meant to be (a typo of it), or None."""
    found = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def not_one_of(value: object, choices: Sequence[str], what: str, listed: str | None = None) -> str:
    """What follows ``--option 'value':`` for a name that is not one of ``choices``: the nearest choice first
    ("did you mean …?"), then the choices themselves, or, when ``listed`` is given (a long list), where to see them."""
    guess = closest(str(value), choices)
    meant = f"; did you mean {guess}?" if guess else ""
    return f"unknown {what}{meant} ({listed or 'choose one of ' + ', '.join(choices)})"


def unknown(option: str, value: object, what: str, choices: Sequence[str], listed: str | None = None) -> str:
    """The whole line: ``--option 'value': unknown WHAT; did you mean …? (choose one of …)``."""
    return f"{option} {value!r}: {not_one_of(value, choices, what, listed)}"


class MissingParam(ParamError):
    """A parameter that what was chosen requires and nobody gave; the line says what needs it, with an example."""

    def __init__(self, name: str, needed_by: str, example: str):
        option = "--" + name.replace("_", "-")
        self.name, self.value, self.allowed = name, None, f"{needed_by} needs it"
        PosexportError.__init__(self, f"{needed_by} needs {option} (not given), e.g. {option} {example}; or take a model's whole rope "
                                      "with --from-config FILE or --preset NAME")


class UnknownOption(PosexportError):
    """An option (``--name``) that nothing here takes. ``known`` are the options the library knows in its place;
    the command line adds its own options to them (``line(also)``), so that a typo of either is answered with
    the nearest. ``detail`` follows in brackets (what does take options here)."""

    def __init__(self, name: str, known: Sequence[str] = (), problem: str = "no such option", detail: str | None = None):
        self.name, self.known, self.problem, self.detail = name, list(known), problem, detail
        super().__init__(self.line())

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def line(self, also: Sequence[str] = ()) -> str:
        guess = closest(self.option, [*self.known, *also])
        meant = f"; did you mean {guess}?" if guess else ""
        return f"{self.option}: {self.problem}{meant}" + (f" ({self.detail})" if self.detail else "")
