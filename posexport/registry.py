"""Name -> encoding. Adding an encoding is its own module plus one line in ``encodings/__init__.py``."""

from __future__ import annotations

from .encodings import ENCODINGS
from .encodings.base import Encoding
from .errors import PosexportError


def get_encoding(name: str) -> Encoding:
    try:
        return ENCODINGS[name]
    except KeyError:
        raise PosexportError(f"--encoding {name!r}: unknown encoding; choose one of {', '.join(ENCODINGS)}") from None


def list_encodings() -> list[Encoding]:
    return list(ENCODINGS.values())
