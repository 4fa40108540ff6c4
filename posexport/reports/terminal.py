"""Tables that fit a terminal without cutting what they show: numbers and names never wrap, text wraps (a long
word folds onto the next line) instead of ending in "…", and a grid with more columns than the terminal holds
names its columns by number with a key below. Off a terminal the console is wide enough for any row
(posexport_cli.common.Output), so none of this changes a pipe's or a log's output."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from rich.measure import Measurement
from rich.table import Table


def table(columns: Sequence[str], whole: Collection[str] = (), title: str | None = None, **options: Any) -> Table:
    """A rich Table whose ``whole`` columns (numbers, runtimes, case names) are never wrapped or cut; the other
    columns wrap, folding a word longer than the column, so nothing is lost for an ellipsis."""
    out = Table(title=title, title_justify="left", **options)
    for name in columns:
        if name in whole:
            out.add_column(name, no_wrap=True, overflow="fold")
        else:
            out.add_column(name, overflow="fold")
    return out


def plural(count: int, noun: str, many: str | None = None) -> str:
    """'1 runtime', '2 runtimes' ('1 property', '3 properties' with ``many``)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def fits(grid: Table, console: Any) -> bool:
    """Whether ``grid`` at its natural width (measured as if the console were unbounded) fits the console."""
    return Measurement.get(console, console.options.update_width(1 << 20), grid).maximum <= console.width


def keyed_headers(names: Sequence[str]) -> tuple[list[str], str]:
    """Short column headers for ``names`` (1, 2, …) and the key line that says which is which."""
    short = [str(i) for i in range(1, len(names) + 1)]
    return short, "key: " + ", ".join(f"{s} = {name}" for s, name in zip(short, names))
