"""Whole models run in a child process, so that a runtime that dies (onnxruntime or OpenVINO terminating
on a malformed model, a segfault) while loading or running one is a RuntimeCrash naming the runtime and
the signal, never the end of the command.

The child is forked from multiprocessing's fork server, which imports the runtimes once per process, so
a session costs a fork rather than a fresh interpreter. It gets the runtime, the model's path (checked by
posexport.guarded before any runtime sees it) and the session options, and loads the model with the
runtime's own ``load_model``: it reads nothing the runtime would not read in this process. Feeds and
outputs cross a pipe as a small JSON header followed by each array's raw bytes (no pickle), read straight
into the array that is returned, so this process holds each output once, or, for an output the caller
names a sink for (model-parity's logits), handed over block by block and never held whole. The child's stderr goes into a
pipe, and its last line (a runtime's dying words: ``terminate called …``) joins the crash's message; after
a crash while running, the next run starts a fresh child. ``call_in_child`` runs one function the same way
(bench --model times each call inside a child).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import numpy_dtype
from ..errors import one_line
from .base import ModelSession, Runtime, SessionOptions

CONTEXT = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["posexport.runtimes", "onnxruntime"])  # imported once, by the fork server
CHUNK = 1 << 24  # bytes per read or write of an array's payload
STDERR_TAIL = 4096  # bytes of the child's stderr kept for a crash's message


class RuntimeCrash(RuntimeError):
    """A runtime's process died (killed by a signal, or exited) while loading or running a model."""


# --- the wire: a JSON header, then each array's bytes -----------------------------------------------


def header(arrays: Mapping[str, np.ndarray]) -> bytes:
    for name, array in arrays.items():
        if array.dtype.hasobject:
            raise TypeError(f"output {name!r} holds {array.dtype} values; only numeric arrays are compared")
    return json.dumps({"arrays": [[name, a.dtype.name, list(a.shape)] for name, a in arrays.items()]}).encode()


def send_arrays(conn: Connection, arrays: Mapping[str, np.ndarray]) -> None:
    contiguous = {name: np.require(a, requirements="C") for name, a in arrays.items()}  # a 0-d output stays 0-d
    conn.send_bytes(header(contiguous))
    for array in contiguous.values():
        raw = memoryview(array.reshape(-1).view(np.uint8))
        while raw:
            raw = raw[os.write(conn.fileno(), raw[:CHUNK]):]


# Takes an output as it arrives instead of holding it: called with its shape and dtype, it returns the
# function that is given each block of rows (every axis but the last flattened) and the block's first row.
Sink = Callable[[tuple[int, ...], np.dtype], Callable[[int, np.ndarray], None]]


def read_into(conn: Connection, array: np.ndarray) -> None:
    raw = memoryview(array.reshape(-1).view(np.uint8))
    while raw:
        got = os.readv(conn.fileno(), [raw[:CHUNK]])
        if not got:
            raise EOFError
        raw = raw[got:]


def receive_arrays(conn: Connection, described: list[list[Any]], sinks: Mapping[str, Sink] | None = None) -> dict[str, np.ndarray]:
    """The arrays described, read from the pipe; those named in ``sinks`` are handed over block by block
    (about CHUNK bytes of whole rows, one buffer reused) and not returned."""
    arrays, failed = {}, None
    for name, dtype, shape in described:
        if name not in (sinks or {}):
            arrays[name] = np.empty(shape, dtype=numpy_dtype(dtype))
            read_into(conn, arrays[name])
            continue
        take = sinks[name](tuple(shape), numpy_dtype(dtype))
        width = shape[-1] if shape else 1
        rows = int(np.prod(shape[:-1])) if shape else 1
        step = max(1, CHUNK // max(width * numpy_dtype(dtype).itemsize, 1))
        buffer = np.empty((min(step, rows), width), dtype=numpy_dtype(dtype))
        for start in range(0, rows, step):
            block = buffer[: min(step, rows - start)]
            read_into(conn, block)
            try:
                take(start, block)
            except Exception as e:  # the rest is still read: the pipe stays in step for the next run
                failed = failed or e
    if failed is not None:
        raise failed
    return arrays


def failure(error: BaseException) -> bytes:
    return json.dumps({"error": [type(error).__name__, one_line(error, 2000)]}).encode()


def raised(kind: str, message: str) -> RuntimeError:
    """The child's exception, under its class's name (the class itself is the child's): what a report says."""
    return type(kind, (RuntimeError,), {})(message)


# --- the child ---------------------------------------------------------------------------------------


def child_main(environment: dict[str, str], target: Callable[..., None], args: tuple[Any, ...], conn: Connection,
               stderr: Connection) -> None:
    """The child: the parent's environment as it is now (the fork server's dates from its start), its
    stderr into the pipe, then ``target(*args, conn)``."""
    os.environ.clear()
    os.environ.update(environment)
    os.dup2(stderr.fileno(), 2)
    os.set_blocking(2, False)  # a full pipe drops the child's stderr rather than blocking it
    target(*args, conn)


def serve(runtime: Runtime, path: str, options: SessionOptions, conn: Connection) -> None:
    """Load the model, say so, then answer each run until the parent closes the pipe."""
    try:
        session = runtime.load_model(Path(path), options)
    except Exception as e:
        conn.send_bytes(failure(e))
        return
    conn.send_bytes(b"{}")
    while True:
        try:
            feeds = receive_arrays(conn, json.loads(conn.recv_bytes())["arrays"])
        except EOFError:
            return
        try:
            outputs = session.run(feeds)
            header(outputs)
        except Exception as e:
            conn.send_bytes(failure(e))
            continue
        send_arrays(conn, outputs)


def serve_call(function: Callable[..., Any], args: tuple[Any, ...], conn: Connection) -> None:
    """Call ``function(*args)`` and send its JSON result."""
    try:
        result = function(*args)
    except Exception as e:
        conn.send_bytes(failure(e))
        return
    conn.send_bytes(json.dumps({"result": result}).encode())


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


def warm() -> None:
    """Start the fork server now (it imports the runtimes once), so that its start overlaps the caller's work."""
    with main_hidden():
        multiprocessing.forkserver.ensure_running()


@dataclass
class Child:
    process: BaseProcess
    conn: Connection
    stderr: Connection

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

    def close(self) -> None:
        self.conn.close()  # the child sees the end of its input and returns
        self.stderr.close()
        self.process.join(10)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()


def forked(target: Callable[..., None], args: tuple[Any, ...], name: str) -> Child:
    """A child running ``target(*args, conn)`` (child_main), its end of both pipes closed here."""
    conn, child_conn = CONTEXT.Pipe()
    stderr, child_stderr = CONTEXT.Pipe(duplex=False)
    process = CONTEXT.Process(target=child_main, args=(dict(os.environ), target, args, child_conn, child_stderr), daemon=True,
                              name=name)
    with main_hidden():
        process.start()
    child_conn.close()
    child_stderr.close()
    return Child(process, conn, stderr)


def call_in_child(function: Callable[..., Any], args: tuple[Any, ...], crashed: str) -> Any:
    """``function(*args)`` (module-level, its result JSON) run in a child: if the child dies, a RuntimeCrash
    saying ``crashed`` and how; if it raises, the child's exception (by its class's name)."""
    child = forked(serve_call, (function, args), "posexport call")
    try:
        reply = json.loads(child.conn.recv_bytes())
    except (EOFError, OSError):
        raise RuntimeCrash(f"{crashed}: {child.death()}") from None
    finally:
        child.close()
    if "error" in reply:
        raise raised(*reply["error"])
    return reply["result"]


class IsolatedModelSession(ModelSession):
    """``runtime.load_model(path)`` in a child process, behind the ModelSession protocol."""

    def __init__(self, runtime: Runtime, path: Path, options: SessionOptions = SessionOptions()):
        self.runtime, self.path, self.options = runtime, Path(path), options
        self.child: Child | None = None
        self.start()

    def start(self) -> Child:
        self.child = forked(serve, (self.runtime, str(self.path), self.options), f"posexport {self.runtime.name}")
        weakref.finalize(self, self.child.close)
        self.exchange(self.child, "loading", None)
        return self.child

    def exchange(self, child: Child, doing: str, feeds: Mapping[str, np.ndarray] | None,
                 sinks: Mapping[str, Sink] | None = None) -> dict[str, np.ndarray]:
        """Send feeds (none: wait for the load) and return the outputs; the child's death is a RuntimeCrash."""
        try:
            if feeds is not None:
                send_arrays(child.conn, feeds)
            reply = json.loads(child.conn.recv_bytes())
            outputs = receive_arrays(child.conn, reply["arrays"], sinks) if "arrays" in reply else {}
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
