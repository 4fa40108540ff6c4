"""Writing files the way every command does: atomically (temporary name beside the target, then rename),
with the permissions a plain open() would give, and any OS failure turned into one user error."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .errors import PosexportError


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary name beside the target, then rename: a failure leaves nothing half-written."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp creates 0600; give the file the permissions a plain open() would have.
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_output(path: str | Path, data: bytes | str, option: str) -> Path:
    """Atomically write a file the user asked for with ``option``; an OS failure is one error line."""
    target = Path(path)
    try:
        atomic_write(target, data.encode() if isinstance(data, str) else data)
    except OSError as e:
        raise PosexportError(f"{option} {target}: cannot write there ({e.strerror}); choose a writable path") from None
    return target
