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
from concurrent.futures import ThreadPoolExecutor, as_completed
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


def shown(argv: list[str]) -> list[str]:
    """The arguments that change what is measured (not where the scratch files go, nor a resumed run)."""
    out, skip = [], False
    for arg in argv:
        if not skip and arg not in ("--resume", "--work"):
            out.append(arg)
        skip = arg == "--work"
    return out


def write(args: argparse.Namespace, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    args.json.write_text(text)
    args.markdown.write_text(render(json.loads(text)))  # the page is what the JSON says, key order included


def previous(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The cells of an earlier run's JSON (none if there is no file yet)."""
    if not path.is_file():
        return {}
    return {(c["architecture"], c["exporter"]): c for c in json.loads(path.read_text())["cells"]}


def main(argv: list[str]) -> int:
    from .cell import run_cell

    parser = argparse.ArgumentParser(prog="python -m matrix")
    parser.add_argument("--architectures", default="", help="comma-separated (default: all)")
    parser.add_argument("--exporters", default="", help="comma-separated (default: all)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--markdown", type=Path, required=True)
    parser.add_argument("--resume", action="store_true", help="keep the cells already in --json and run the others")
    parser.add_argument("--jobs", type=int, default=2, help="cells run at once")
    parser.add_argument("--work", type=Path, default=None, help="folder for models and exports (default: a temp folder)")
    args = parser.parse_args(argv)
    architectures = chosen(args.architectures, ARCHITECTURES, "--architectures")
    exporters = chosen(args.exporters, EXPORTERS, "--exporters")
    work = args.work or Path(tempfile.mkdtemp(prefix="posexport-matrix-"))
    start = time.monotonic()
    spent = json.loads(args.json.read_text())["meta"]["seconds"] if args.resume and args.json.is_file() else 0
    meta = {"command": "python -m matrix " + " ".join(shlex.quote(a) for a in shown(argv)),
            "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "cpu_count": os.cpu_count(), "versions": versions(),
            "exporters": {name: EXPORTERS[name].label for name in exporters}}
    models = {name: build(ARCHITECTURES[name], work / "models") for name in architectures}
    pairs = [(name, exporter) for name in architectures for exporter in exporters]
    done = previous(args.json) if args.resume else {}
    meta["cells_planned"] = len(pairs)
    # Cells run --jobs at a time: most of a cell is an exporter's subprocess; every run-time ratio is timed
    # interleaved, so a neighbouring cell slows both of its models alike.
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_cell, ARCHITECTURES[a], e, models[a], work): (a, e) for a, e in pairs if (a, e) not in done}
        for future in as_completed(futures):
            done[futures[future]] = cell = future.result()
            print(f"{cell['architecture']} × {cell['exporter']}: {cell['verdict']} {cell.get('reason', '')}", file=sys.stderr, flush=True)
            write(args, {"meta": meta | {"seconds": round(time.monotonic() - start) + spent}, "cells": [done[p] for p in pairs if p in done]})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
