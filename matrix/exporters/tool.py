"""Running an exporter's own command line from its venv, its failure as its last line of output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from . import ExporterFailed


def run_tool(command: list[str], timeout: int = 600) -> None:
    """Run ``command`` (its first word a script of this venv's bin/, or a module for -m)."""
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        raise ExporterFailed(lines[-1][:300] if lines else f"exit status {proc.returncode}")


def script(name: str) -> str:
    return str(Path(sys.prefix) / "bin" / name)


def only_onnx(out: Path) -> Path:
    """The one decoder .onnx an exporter wrote under ``out``."""
    found = sorted(p for p in out.rglob("*.onnx") if "encoder" not in p.name)
    if not found:
        raise ExporterFailed(f"the exporter wrote no .onnx under {out.name}")
    return found[0]
