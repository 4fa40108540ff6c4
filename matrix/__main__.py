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


def previous(path: Path) -> dict[str, Any]:
    """An earlier run's JSON (no cells if there is no file yet)."""
    return json.loads(path.read_text()) if path.is_file() else {"meta": {}, "cells": []}


def planned(args: argparse.Namespace, argv: list[str], pairs: list[tuple[str, str]]) -> tuple[dict[str, Any], list, dict]:
    """(meta, every cell of the page in order, the cells kept): a new run, a resumed one (its cells kept, the
    others run), or a re-run (the named cells run again, every other cell of --json kept, the re-run recorded)."""
    now = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    command = "python -m matrix " + " ".join(shlex.quote(a) for a in shown(argv))
    labels = {name: EXPORTERS[name].label for name in dict.fromkeys(e for _, e in pairs)}
    before = previous(args.json) if args.resume or args.rerun else {"meta": {}, "cells": []}
    kept = {(c["architecture"], c["exporter"]): c for c in before["cells"]}
    if not args.rerun:
        meta = {"command": command, "time_utc": now, "cpu_count": os.cpu_count(), "versions": versions(), "exporters": labels,
                "seconds": before["meta"].get("seconds", 0), "cells_planned": len(pairs)}
        return meta, pairs, kept
    if not kept:
        raise SystemExit(f"error: --rerun: {args.json} holds no matrix to re-run cells of")
    order = list(kept) + [p for p in pairs if p not in kept]
    meta = before["meta"] | {"exporters": before["meta"]["exporters"] | labels, "cells_planned": len(order)}
    rerun = {"command": command, "time_utc": now, "cells": len(pairs), "versions": versions(), "seconds": 0}
    meta["reruns"] = meta.get("reruns", []) + [rerun]
    return meta, order, {p: c for p, c in kept.items() if p not in pairs}


def main(argv: list[str]) -> int:
    from .cell import run_cell

    parser = argparse.ArgumentParser(prog="python -m matrix")
    parser.add_argument("--architectures", default="", help="comma-separated (default: all)")
    parser.add_argument("--exporters", default="", help="comma-separated (default: all)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--markdown", type=Path, required=True)
    parser.add_argument("--resume", action="store_true", help="keep the cells already in --json and run the others")
    parser.add_argument("--rerun", action="store_true", help="run the cells of --architectures × --exporters again, keeping every "
                        "other cell of --json; the page records the re-run")
    parser.add_argument("--jobs", type=int, default=2, help="cells run at once")
    parser.add_argument("--work", type=Path, default=None, help="folder for models and exports (default: a temp folder)")
    args = parser.parse_args(argv)
    if args.resume and args.rerun:
        raise SystemExit("error: --resume and --rerun: choose one")
    architectures = chosen(args.architectures, ARCHITECTURES, "--architectures")
    exporters = chosen(args.exporters, EXPORTERS, "--exporters")
    work = args.work or Path(tempfile.mkdtemp(prefix="posexport-matrix-"))
    start = time.monotonic()
    models = {name: build(ARCHITECTURES[name], work / "models") for name in architectures}
    meta, order, done = planned(args, argv, [(name, exporter) for name in architectures for exporter in exporters])
    timed = meta["reruns"][-1] if args.rerun else meta
    spent = timed["seconds"]
    # Cells run --jobs at a time: most of a cell is an exporter's subprocess; every run-time ratio is timed
    # interleaved, so a neighbouring cell slows both of its models alike.
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_cell, ARCHITECTURES[a], e, models[a], work): (a, e) for a, e in order if (a, e) not in done}
        for future in as_completed(futures):
            done[futures[future]] = cell = future.result()
            print(f"{cell['architecture']} × {cell['exporter']}: {cell['verdict']} {cell.get('reason', '')}", file=sys.stderr, flush=True)
            timed["seconds"] = round(time.monotonic() - start) + spent
            write(args, {"meta": meta, "cells": [done[p] for p in order if p in done]})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
