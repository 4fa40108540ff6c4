"""The transformers release posexport's catalogue and transformers-judged checks were made against, and the one
place where posexport reaches into transformers' modules by name.

transformers ships weekly: model types appear, and a modeling module's functions move (5.25 replaced HY-V4's
`apply_rotary_pos_emb` by `apply_rotary_pos_emb_interleave`). The project's lock (locks/project.txt) pins the
release the catalogue was checked against; on any other release, a type posexport does not know or a piece of
transformers code that moved is one line naming both versions, never an AttributeError.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

from .errors import PosexportError

# The transformers release of locks/project.txt: docs/models.md's catalogue and every reader were checked against
# it (tests/test_upstream.py holds the two equal).
CHECKED_TRANSFORMERS = "5.25.0"


def installed_transformers() -> str | None:
    """The installed transformers' version, or None."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return None


def versions_note() -> str:
    """'transformers X is installed; posexport was checked against transformers Y' (or that they are the same)."""
    installed = installed_transformers()
    if installed == CHECKED_TRANSFORMERS:
        return f"posexport was checked against the installed transformers {installed}"
    return (f"transformers {installed or '(none)'} is installed; posexport was checked against transformers "
            f"{CHECKED_TRANSFORMERS}")


def transformers_attr(module: str, name: str) -> Any:
    """`module.name` of transformers' code (a modeling function, class or helper), or one line saying which piece
    the installed transformers lacks."""
    try:
        found = importlib.import_module(module)
    except ImportError as e:
        raise PosexportError(f"{module} cannot be imported ({e}); {versions_note()}: install "
                             f"transformers=={CHECKED_TRANSFORMERS}, or a posexport checked against yours") from None
    try:
        return getattr(found, name)
    except AttributeError:
        raise PosexportError(f"{module} has no {name}: transformers moved this model's position code; "
                             f"{versions_note()}: install transformers=={CHECKED_TRANSFORMERS}, or a posexport "
                             "checked against yours") from None
