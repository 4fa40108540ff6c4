"""Markdown pieces every report shares (parity and bench)."""

from __future__ import annotations

from collections.abc import Iterable

from .escape import md_text


def md_table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    """A table whose every cell is escaped (posexport.reports.escape.md_text): one row per row, whatever it holds."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in rows]
    return lines + [""]
