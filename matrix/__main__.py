"""``python -m matrix``: run the matrix (every architecture × every exporter, or those named) and write
its JSON and page. The JSON is rewritten after every cell, so a long run can be watched."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .exporters import EXPORTERS
from .models import ARCHITECTURES, build
from .page import render


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("posexport", "torch", "transformers", "onnx", "onnxruntime", "onnxscript", "onnxruntime-genai"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def chosen(text: str, known: dict[str, Any], option: str) -> list[str]:
    names = [n for n in text.split(",") if n] or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"error: {option} {','.join(unknown)}: choose from {', '.join(known)}")
    return names


def main(argv: list[str]) -> int:
    from .cell import run_cell

    parser = argparse.ArgumentParser(prog="python -m matrix")
    parser.add_argument("--architectures", default="", help="comma-separated (default: all)")
    parser.add_argument("--exporters", default="", help="comma-separated (default: all)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--markdown", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=None, help="folder for models and exports (default: a temp folder)")
    args = parser.parse_args(argv)
    architectures = chosen(args.architectures, ARCHITECTURES, "--architectures")
    exporters = chosen(args.exporters, EXPORTERS, "--exporters")
    work = args.work or Path(tempfile.mkdtemp(prefix="posexport-matrix-"))
    start = time.monotonic()
    meta = {"command": "python -m matrix " + " ".join(shlex.quote(a) for a in argv if not a.startswith("--work")),
            "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "cpu_count": os.cpu_count(), "versions": versions(),
            "exporters": {name: EXPORTERS[name].label for name in exporters}}
    cells = []
    for name in architectures:
        model = build(ARCHITECTURES[name], work / "models")
        for exporter in exporters:
            cells.append(run_cell(ARCHITECTURES[name], exporter, model, work))
            print(f"{name} × {exporter}: {cells[-1]['verdict']} {cells[-1].get('reason', '')}", file=sys.stderr, flush=True)
            data = {"meta": meta | {"seconds": round(time.monotonic() - start)}, "cells": cells}
            args.json.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    args.markdown.write_text(render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
