"""The one exception type users see: its message is a single line saying what was wrong and how to fix it."""


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
