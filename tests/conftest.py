"""Shared fixtures: built graphs and loaded sessions are cached for the whole session."""

from __future__ import annotations

import functools
import os
import shutil
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


def normalised_error(out: np.ndarray, ref: np.ndarray) -> float:
    """The parity error: max|out − ref| / max(1, max|ref|) (docs/numerics.md)."""
    return float(np.max(np.abs(out.astype(np.float64) - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def posexport_cli(*args: str, cwd: Path | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the installed `posexport` command in a subprocess, as a user would."""
    exe = shutil.which("posexport", path=os.path.dirname(sys.executable)) or shutil.which("posexport")
    assert exe, "the posexport command is not installed (pip install -e .)"
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"posexport {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
