"""How the processes of posexport.runtimes.isolated die with the command that started them.

The fork server imports this module first (isolated's preload list) and, told so by the variable its parent
sets while starting it (FORK_SERVER_OF, the parent's pid), sets itself up here, at import: it dies with the
parent (Linux's PR_SET_PDEATHSIG, SIGKILL: also when the parent is killed outright), leads a process group of
its own (every child it forks is in it, and the parent kills that group on any exit) and lets go of the
caller's stdout and stderr (a CI step reading them to their end never waits on it). Each child then calls
``die_with_parent`` itself, so that it dies with the fork server. Imported anywhere else (the variable is
unset), the module does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

FORK_SERVER_OF = "POSEXPORT_FORK_SERVER_OF"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (Linux); gone at once when ``parent`` already has (the
    process was handed to another)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def release_stdio() -> None:
    """stdout and stderr to /dev/null: the caller's pipes are held by the command alone."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)


if os.environ.get(FORK_SERVER_OF, "").isdigit():
    die_with_parent(int(os.environ.pop(FORK_SERVER_OF)))
    os.setpgid(0, 0)
    release_stdio()
