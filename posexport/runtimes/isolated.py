"""Whole models run in a child process, so that a runtime that dies (onnxruntime or OpenVINO terminating
on a malformed model, a segfault) or runs past its time while loading or running one is a RuntimeCrash
naming the runtime and the signal (or the deadline), never the end of the command.

The child is forked from multiprocessing's fork server, which imports the runtimes once per process, so
a session costs a fork rather than a fresh interpreter. It gets the runtime, the model's path (checked by
posexport.guarded before any runtime sees it) and the session options, and loads the model with the
runtime's own ``load_model``: it reads nothing the runtime would not read in this process. Feeds and
outputs cross a socket as a small length-prefixed JSON header followed by each array's raw bytes (no
pickle), read straight into the array that is returned, so this process holds each output once, and
only once its declared shapes fit the byte budget, or, for an output the caller names a sink for
(model-parity's logits), handed over block by block and never held whole. The child's stderr goes into a pipe, and its last line
(a runtime's dying words: ``terminate called …``) joins the crash's message; after a crash while running,
the next run starts a fresh child. ``call_in_child`` runs one function the same way (bench --model times
each call inside a child).

Deadlines: every exchange with a child (a load, a run, a call) has ``timeout`` seconds; past it the child
is killed (SIGKILL, which also ends a stopped one) and the call is a RuntimeTimeout saying so.

Lifetime (posexport.runtimes.fork_server): the fork server and every child die with the command, also
when it is killed outright (PR_SET_PDEATHSIG); they form one process group, killed when the command exits
in any other way; they never hold the caller's stdout or stderr. The fork server's socket lies in a short
private folder, not under TMPDIR (a long TMPDIR would pass AF_UNIX's ~108-byte limit).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.process
import os
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np

from .. import limits
from ..contract import DEFAULT_TIMEOUT
from ..dtypes import numpy_dtype
from ..errors import PosexportError, one_line
from .base import ModelSession, Runtime, SessionOptions
from .fork_server import FORK_SERVER_OF, die_with_parent

CONTEXT = multiprocessing.get_context("forkserver")
# fork_server first: it sets the server up before the runtimes are imported (once, by the fork server)
CONTEXT.set_forkserver_preload(["posexport.runtimes.fork_server", "posexport.runtimes", "onnxruntime"])
CHUNK = 1 << 24  # bytes per read or write of an array's payload
STDERR_TAIL = 4096  # bytes of the child's stderr kept for a crash's message
MAX_MESSAGE = 64 << 20  # a header or an error message; arrays follow as raw bytes
# Where the fork server's socket goes when the system's temporary folder is too deep for AF_UNIX (its
# path must stay under ~108 bytes): the first of these that is a writable folder.
SHORT_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
SOCKET_ROOM = 60  # bytes left for multiprocessing's own names under the temporary folder
CLOSING = 0.5  # seconds a closed child has to return before it is killed (an idle one needs milliseconds)


class RuntimeCrash(RuntimeError):
    """A runtime's process died (killed by a signal, or exited) while loading or running a model."""


class RuntimeTimeout(RuntimeCrash):
    """A runtime's process ran past its deadline and was killed."""


class ChildError(RuntimeError):
    """An exception raised in a child, re-raised here under its class's name (``raised``)."""


# --- the wire: a length-prefixed JSON header, then each array's bytes ---------------------------------
# The parent's end is non-blocking and every wait has a deadline (None: the child, which blocks).


def wait(fd: int, events: int, deadline: float | None) -> None:
    if deadline is None:
        return
    poller = select.poll()
    poller.register(fd, events)
    left = deadline - time.monotonic()
    if left <= 0 or not poller.poll(left * 1000):
        raise TimeoutError


def write_all(fd: int, data: bytes | memoryview, deadline: float | None) -> None:
    view = memoryview(data).cast("B")
    while view:
        wait(fd, select.POLLOUT, deadline)
        with contextlib.suppress(BlockingIOError):
            view = view[os.write(fd, view[:CHUNK]):]


def read_into(fd: int, view: memoryview, deadline: float | None) -> None:
    while view:
        wait(fd, select.POLLIN, deadline)
        try:
            got = os.readv(fd, [view[:CHUNK]])
        except BlockingIOError:
            continue
        if not got:
            raise EOFError
        view = view[got:]


def send_message(fd: int, payload: bytes, deadline: float | None = None) -> None:
    write_all(fd, struct.pack("<Q", len(payload)) + payload, deadline)


def receive_message(fd: int, deadline: float | None = None) -> Any:
    size = bytearray(8)
    read_into(fd, memoryview(size), deadline)
    (length,) = struct.unpack("<Q", size)
    if length > MAX_MESSAGE:
        raise EOFError  # not a message of posexport's: the stream is broken
    payload = bytearray(length)
    read_into(fd, memoryview(payload), deadline)
    return json.loads(payload)


def header(arrays: Mapping[str, np.ndarray]) -> bytes:
    for name, array in arrays.items():
        if array.dtype.hasobject:
            raise TypeError(f"output {name!r} holds {array.dtype} values; only numeric arrays are compared")
    return json.dumps({"arrays": [[name, a.dtype.name, list(a.shape)] for name, a in arrays.items()]}).encode()


def send_arrays(fd: int, arrays: Mapping[str, np.ndarray], deadline: float | None = None) -> None:
    contiguous = {name: np.require(a, requirements="C") for name, a in arrays.items()}  # a 0-d output stays 0-d
    send_message(fd, header(contiguous), deadline)
    for array in contiguous.values():
        write_all(fd, memoryview(array.reshape(-1).view(np.uint8)), deadline)


# Takes an output as it arrives instead of holding it: called with its shape and dtype, it returns the
# function that is given each block of rows (every axis but the last flattened) and the block's first row.
Sink = Callable[[tuple[int, ...], np.dtype], Callable[[int, np.ndarray], None]]


def check_received(described: list[list[Any]], what: str, sinks: Mapping[str, Sink] | None = None) -> None:
    """Arrays about to be received and held (not those a sink takes block by block) fit the byte budget:
    each in its dtype, and in float64 by the comparison that judges it; refused naming the largest,
    before anything is allocated."""
    sizes = [(math.prod(shape) * (numpy_dtype(dtype).itemsize + limits.FLOAT64), name, dtype, shape)
             for name, dtype, shape in described if name not in (sinks or {})]
    largest = max(sizes, default=(0, "", "", []))
    limits.check_allocation(what, f"its outputs ({largest[1]!r} alone {largest[3]} of {largest[2]}), held and widened to "
                                  "float64 for the comparison,", sum(size for size, *_ in sizes))


def receive_arrays(fd: int, described: list[list[Any]], sinks: Mapping[str, Sink] | None = None,
                   deadline: float | None = None) -> dict[str, np.ndarray]:
    """The arrays described, read from the socket; those named in ``sinks`` are handed over block by block
    (about CHUNK bytes of whole rows, one buffer reused) and not returned."""
    arrays, failed = {}, None
    for name, dtype, shape in described:
        if name not in (sinks or {}):
            arrays[name] = np.empty(shape, dtype=numpy_dtype(dtype))
            read_into(fd, memoryview(arrays[name].reshape(-1).view(np.uint8)), deadline)
            continue
        take = sinks[name](tuple(shape), numpy_dtype(dtype))
        width = shape[-1] if shape else 1
        rows = int(np.prod(shape[:-1])) if shape else 1
        step = max(1, CHUNK // max(width * numpy_dtype(dtype).itemsize, 1))
        buffer = np.empty((min(step, rows), width), dtype=numpy_dtype(dtype))
        for start in range(0, rows, step):
            block = buffer[: min(step, rows - start)]
            read_into(fd, memoryview(block.reshape(-1).view(np.uint8)), deadline)
            try:
                take(start, block)
            except Exception as e:  # the rest is still read: the socket stays in step for the next run
                failed = failed or e
    if failed is not None:
        raise failed
    return arrays


def failure(error: BaseException) -> bytes:
    return json.dumps({"error": [type(error).__name__, one_line(error, 2000)]}).encode()


def raised(kind: str, message: str) -> Exception:
    """The child's exception: a refusal of posexport's is one again (its line is the user's answer); any
    other is a ChildError under its class's name (the class itself is the child's): what a report says."""
    if kind in ("PosexportError", "ParamError"):
        return PosexportError(message)
    return type(kind, (ChildError,), {})(message)


# --- the child ---------------------------------------------------------------------------------------


def child_main(environment: dict[str, str], server: int, target: Callable[..., None], args: tuple[Any, ...],
               conn: Connection, stderr: Connection) -> None:
    """The child: dies with the fork server ``server`` (which dies with the command), lets go of the fork
    server's liveness pipe (so that the server ends when the command does), the parent's environment as
    it is now (the fork server's dates from its start), stdout to /dev/null and stderr into the pipe, then
    ``target(*args, fd)``."""
    die_with_parent(server)
    alive = multiprocessing.forkserver._forkserver._forkserver_alive_fd
    if alive is not None:
        os.close(alive)
        multiprocessing.forkserver._forkserver._forkserver_alive_fd = None
    os.environ.clear()
    os.environ.update(environment)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    os.dup2(stderr.fileno(), 2)
    os.set_blocking(2, False)  # a full pipe drops the child's stderr rather than blocking it
    target(*args, conn.fileno())


def serve(runtime: Runtime, path: str, options: SessionOptions, fd: int) -> None:
    """Load the model, say so, then answer each run until the parent closes the socket."""
    try:
        session = runtime.load_model(Path(path), options)
    except Exception as e:
        send_message(fd, failure(e))
        return
    send_message(fd, b"{}")
    while True:
        try:
            feeds = receive_arrays(fd, receive_message(fd)["arrays"])
        except EOFError:
            return
        try:
            outputs = session.run(feeds)
            header(outputs)
        except Exception as e:
            send_message(fd, failure(e))
            continue
        send_arrays(fd, outputs)


def serve_call(function: Callable[..., Any], args: tuple[Any, ...], fd: int) -> None:
    """Call ``function(*args)`` and send its JSON result."""
    try:
        result = function(*args)
    except Exception as e:
        send_message(fd, failure(e))
        return
    send_message(fd, json.dumps({"result": result}).encode())


# --- the parent --------------------------------------------------------------------------------------


@contextlib.contextmanager
def main_hidden() -> Iterator[None]:
    """multiprocessing runs the parent's main script again in each child (and in the fork server) unless it
    is hidden for the instant of a start: the child needs only posexport, and a user's script without an
    ``if __name__ == "__main__"`` guard would run again there, and fail."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def short_socket_folder() -> None:
    """multiprocessing puts the fork server's socket in its temporary folder: a private folder under the
    first of SHORT_FOLDERS when the system's (TMPDIR) is too deep for a socket path."""
    config = multiprocessing.process.current_process()._config
    if len(os.fsencode(config.get("tempdir") or tempfile.gettempdir())) <= SOCKET_ROOM:
        return
    base = next((f for f in SHORT_FOLDERS if os.path.isdir(f) and os.access(f, os.W_OK | os.X_OK)), None)
    if base is None:
        raise PosexportError(f"TMPDIR {tempfile.gettempdir()}: too long a path for the runtimes' socket, and none of "
                             f"{', '.join(SHORT_FOLDERS)} is writable; set TMPDIR to a shorter folder")
    config["tempdir"] = tempfile.mkdtemp(prefix="posexport-", dir=base)  # 0700: private
    atexit.register(shutil.rmtree, config["tempdir"], ignore_errors=True)


def server_pid() -> int | None:
    return multiprocessing.forkserver._forkserver._forkserver_pid


def warm() -> None:
    """Start the fork server now (it imports the runtimes once), so that its start overlaps the caller's
    work; it is set up to die with this process (posexport.runtimes.fork_server)."""
    with main_hidden():
        short_socket_folder()
        os.environ[FORK_SERVER_OF] = str(os.getpid())
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.pop(FORK_SERVER_OF, None)


@atexit.register
def stop_children() -> None:
    """On any exit of the command: the fork server's process group (the server and every child) killed,
    before multiprocessing's own exit handler waits for its children (a stopped one would never end)."""
    pid = server_pid()
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid != os.getpgrp():  # the server leads a group of its own: never this one
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    for child in multiprocessing.active_children():
        with contextlib.suppress(ProcessLookupError):
            child.kill()


def process_state(pid: int) -> str:
    """' (it was stopped)' when the process is stopped (SIGSTOP, a debugger), else ''."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return ""
    return " (it was stopped)" if state in (b"T", b"t") else ""


@dataclass
class Child:
    process: BaseProcess
    conn: Connection
    stderr: Connection
    timeout: float

    @property
    def fd(self) -> int:
        return self.conn.fileno()

    def deadline(self) -> float:
        return time.monotonic() + self.timeout

    def tail(self) -> str:
        """The last line the child wrote to stderr, read without waiting."""
        os.set_blocking(self.stderr.fileno(), False)
        data = b""
        try:
            while chunk := os.read(self.stderr.fileno(), 1 << 16):
                data = (data + chunk)[-STDERR_TAIL:]
        except BlockingIOError:
            pass
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""

    def death(self) -> str:
        self.process.join(10)
        code = self.process.exitcode
        if code is None:  # the pipe broke but the child lives on: end it
            self.process.kill()
            self.process.join()
            return "its pipe broke"
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
        last = self.tail()
        return f"{how} ({last})" if last else how

    def overdue(self) -> str:
        """Kill a child past its deadline; what the message says of it."""
        stopped = process_state(self.process.pid) if self.process.pid else ""
        self.kill()
        return f"ran past the --timeout of {self.timeout:g} s{stopped}, and was killed"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.join()
        self.close()

    def close(self) -> None:
        self.conn.close()  # an idle child sees the end of its input and returns; a busy one is killed
        self.stderr.close()
        self.process.join(CLOSING)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()


def forked(target: Callable[..., None], args: tuple[Any, ...], name: str, timeout: float) -> Child:
    """A child running ``target(*args, fd)`` (child_main), its ends of both pipes closed here."""
    warm()
    conn, child_conn = CONTEXT.Pipe()
    stderr, child_stderr = CONTEXT.Pipe(duplex=False)
    process = CONTEXT.Process(target=child_main, args=(dict(os.environ), server_pid(), target, args, child_conn, child_stderr),
                              daemon=True, name=name)
    with main_hidden():
        process.start()
    child_conn.close()
    child_stderr.close()
    os.set_blocking(conn.fileno(), False)  # every wait here has a deadline (wait)
    return Child(process, conn, stderr, timeout)


def check_timeout(timeout: float) -> float:
    if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
        raise PosexportError(f"--timeout {timeout!r}: expected a positive number of seconds")
    return float(timeout)


def call_in_child(function: Callable[..., Any], args: tuple[Any, ...], who: str, doing: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """``function(*args)`` (module-level, its result JSON) run in a child within ``timeout`` seconds: if the
    child dies, a RuntimeCrash saying that ``who`` crashed ``doing`` and how; past the deadline, a
    RuntimeTimeout; if it raises, the child's exception (``raised``)."""
    child = forked(serve_call, (function, args), "posexport call", check_timeout(timeout))
    try:
        reply = receive_message(child.fd, child.deadline())
    except TimeoutError:
        raise RuntimeTimeout(f"{who} timed out {doing}: {child.overdue()}") from None
    except (EOFError, OSError):
        raise RuntimeCrash(f"{who} crashed {doing}: {child.death()}") from None
    finally:
        child.close()
    if "error" in reply:
        raise raised(*reply["error"])
    return reply["result"]


class IsolatedModelSession(ModelSession):
    """``runtime.load_model(path)`` in a child process, behind the ModelSession protocol; each load and run
    within ``timeout`` seconds."""

    def __init__(self, runtime: Runtime, path: Path, options: SessionOptions = SessionOptions(), timeout: float = DEFAULT_TIMEOUT):
        self.runtime, self.path, self.options, self.timeout = runtime, Path(path), options, check_timeout(timeout)
        self.child: Child | None = None
        self.start()

    def start(self) -> Child:
        self.child = forked(serve, (self.runtime, str(self.path), self.options), f"posexport {self.runtime.name}", self.timeout)
        weakref.finalize(self, self.child.close)
        self.exchange(self.child, "loading", None)
        return self.child

    def exchange(self, child: Child, doing: str, feeds: Mapping[str, np.ndarray] | None,
                 sinks: Mapping[str, Sink] | None = None) -> dict[str, np.ndarray]:
        """Send feeds (none: wait for the load) and return the outputs (those ``sinks`` take are handed to
        them); the child's death is a RuntimeCrash, its deadline passed a RuntimeTimeout, outputs past the
        byte budget a refusal (the child killed)."""
        deadline = child.deadline()
        what = f"{self.runtime.name} {doing} {self.path.name}"
        try:
            if feeds is not None:
                send_arrays(child.fd, feeds, deadline)
            reply = receive_message(child.fd, deadline)
            if "arrays" in reply:
                check_received(reply["arrays"], what, sinks)
            outputs = receive_arrays(child.fd, reply["arrays"], sinks, deadline) if "arrays" in reply else {}
        except TimeoutError:
            self.child = None
            raise RuntimeTimeout(f"{self.runtime.name} timed out while {doing} {self.path.name}: {child.overdue()}") from None
        except PosexportError:
            self.child = None
            child.kill()  # it is still sending what will not be read
            raise
        except (EOFError, OSError):
            self.child, why = None, child.death()
            child.close()
            raise RuntimeCrash(f"{self.runtime.name} crashed while {doing} {self.path.name}: {why}") from None
        child.tail()  # drained, so that the child's stderr never fills
        if "error" in reply:
            if feeds is None:  # a load that failed: the child has returned
                self.child = None
                child.close()
            raise raised(*reply["error"])
        return outputs

    def run(self, feeds: Mapping[str, np.ndarray], sinks: Mapping[str, Sink] | None = None) -> dict[str, np.ndarray]:
        """The outputs, except those ``sinks`` take block by block as they arrive (model-parity's logits)."""
        child = self.child or self.start()  # none: the last run crashed it, so a fresh one
        return self.exchange(child, "running", feeds, sinks)
