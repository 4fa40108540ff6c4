"""`posexport env`: what a bug report needs (Python, platform, package versions, every runtime and why one is not
available)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from .common import console


def env_command(json_out: Path = typer.Option(None, "--json", help="also write it as JSON to this file (docs/schemas/env.json)")) -> None:
    """Show Python, the platform, the versions posexport runs with and every runtime, available or not and why (the
    browser runtimes start a headless Chromium to say: a second or two). Paste it into a bug report."""
    import json

    from posexport.api import env
    from posexport.files import check_destination, write_output
    from posexport.reports.terminal import table

    if json_out:
        check_destination(json_out, "--json")
    found = env()
    console.print(f"python {found['python']} on {found['platform']}", highlight=False)
    console.print("versions: " + ", ".join(f"{k} {v}" for k, v in found["versions"].items() if v), highlight=False)
    absent = [k for k, v in found["versions"].items() if v is None]
    if absent:
        console.print("not installed: " + ", ".join(absent), highlight=False)
    runtimes = table(("runtime", "available", "why not"), ("runtime", "available"), "runtimes (`--runtimes NAME`)")
    for r in found["runtimes"]:
        runtimes.add_row(r["name"], "yes" if r["available"] else "no", escape(r["why_not"] or ""))
    console.print(runtimes)
    if json_out:
        write_output(json_out, json.dumps(found, indent=2, sort_keys=True) + "\n", "--json")


def register(app: typer.Typer) -> None:
    app.command("env")(env_command)
