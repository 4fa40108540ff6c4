"""The one exception type users see: its message is a single line saying what was wrong and how to fix it."""


class PosexportError(Exception):
    """A problem with the user's input or environment (not a bug in posexport)."""


class ParamError(PosexportError, ValueError):
    """An encoding parameter is out of range; the message names the parameter and what it accepts."""

    def __init__(self, name: str, value: object, allowed: str):
        self.name = name
        super().__init__(f"--{name.replace('_', '-')} {value!r}: {allowed}")
