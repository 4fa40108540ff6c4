"""Progress of a long step (reading, writing data, a parity case), as one line rewritten in place on
stderr: only when stderr is a terminal, and only once the step has run for a few seconds, so short runs,
pipes, logs and tests see nothing."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

# A step shorter than this shows nothing; a shown line is redrawn at most this often.
AFTER_S = 2.0
EVERY_S = 0.2


def amount(n: float, unit: str) -> str:
    if unit != "B":
        return f"{n:g}{unit}"
    for scale, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= scale:
            return f"{n / scale:.1f} {name}"
    return f"{n:g} B"


@contextlib.contextmanager
def progress(label: str, total: float, unit: str = "B") -> Iterator[Callable[[float], None]]:
    """``advance(n)`` to call as work is done; shows "label: done / total (percent)" on a terminal."""
    stream = sys.stderr
    shown = stream.isatty()
    start = last = time.monotonic()
    done = 0.0
    drawn = False

    def advance(n: float) -> None:
        nonlocal done, last, drawn
        done += n
        now = time.monotonic()
        if shown and now - start >= AFTER_S and now - last >= EVERY_S:
            percent = f" ({100 * done / total:.0f}%)" if total else ""
            stream.write(f"\r{label}: {amount(done, unit)} / {amount(total, unit)}{percent}\033[K")
            stream.flush()
            last, drawn = now, True

    try:
        yield advance
    finally:
        if drawn:
            stream.write(f"\r{label}: {amount(done, unit)} in {time.monotonic() - start:.1f} s\033[K\n")
            stream.flush()
