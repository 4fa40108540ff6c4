"""Shared fixtures: built graphs and loaded sessions are cached for the whole session."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posexport import export
from posexport.runtimes import get_runtime

ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def _artifact(encoding: str, dtype: str, source: str, backend: str, opset: int, items: tuple) -> export.Artifact:
    return export.build(encoding, dict(items), dtype=dtype, source=source, backend=backend, opset=opset)


def artifact(encoding: str, dtype: str = "float32", source: str = "script", backend: str = "portable", opset: int = export.DEFAULT_OPSET, **params) -> export.Artifact:
    """A built graph, built once per test session for each distinct set of arguments. Tests default to the
    portable backend, which every runtime runs (`auto` picks onnxruntime's contrib op); tests/test_backends.py
    covers the others."""
    return _artifact(encoding, dtype, source, backend, opset, tuple(sorted(params.items())))


@functools.lru_cache(maxsize=None)
def _session(art_id: int, runtime: str):
    return get_runtime(runtime).load(_by_id[art_id])


_by_id: dict[int, export.Artifact] = {}


def session(art: export.Artifact, runtime: str):
    """A loaded runtime session for a built graph, cached like the graph itself."""
    _by_id[id(art)] = art
    return _session(id(art), runtime)


def posexport_cli(*args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run `posexport ARGS` as a user types it, in-process (the command's own main: its error lines and
    exit codes, stdout and stderr apart); a subprocess would add seconds of start-up and nothing else."""
    from posexport_cli.main import main

    out, err = io.StringIO(), io.StringIO()
    argv, here = sys.argv, os.getcwd()
    sys.argv = ["posexport", *map(str, args)]
    code = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
        os.chdir(here)
    proc = subprocess.CompletedProcess(["posexport", *map(str, args)], code, out.getvalue(), err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"posexport {' '.join(map(str, args))} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session", autouse=True)
def one_browser_per_session():
    """The browser runtimes (ort-web-wasm, ort-webgpu) share one Chromium per test session: started by the first
    test that asks for one, closed here at the end (tests that need a browser of their own name another binary)."""
    yield
    from posexport.runtimes.browser import close_all

    close_all()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
