"""Registry-wide walks, sampled: `make test` (CI) runs a stratified sample that keeps at least one member of every
stratum (a reader and the form it reads), `make test-all` (POSEXPORT_TEST_ALL=1) runs every member."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable

ALL = os.environ.get("POSEXPORT_TEST_ALL") == "1"


def stratified(items: Iterable[str], stratum: Callable[[str], Hashable], always: Iterable[str] = ()) -> list[str]:
    """Every item under `make test-all`; otherwise the first item (sorted) of each stratum, and `always`."""
    items = sorted(items)
    if ALL:
        return items
    first: dict[Hashable, str] = {}
    for item in items:
        first.setdefault(stratum(item), item)
    return sorted(set(first.values()) | (set(always) & set(items)))
