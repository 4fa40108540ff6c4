"""Markdown of the doctor's report: sites and faults (whole-model parity renders as every verdict does,
posexport.reports.parity)."""

from __future__ import annotations

from typing import Any

from .escape import md_code, md_text
from .markdown import md_table


def doctor_markdown(report: dict[str, Any]) -> str:
    """Sites (kind, node, what was recovered) and every fault with its numbers."""
    exporter = report["exporter"]
    written = f"{exporter['name']}{' ' + exporter['version'] if exporter['version'] else ''} ({'; '.join(exporter['evidence'])})"
    lines = [f"# Positional-encoding sites of {md_code(report['model'])}", "", f"Written by {md_text(written)}.", ""]
    sites = [(str(i), s["kind"], s["node"], f"{len(s['feeds'])} node(s)",
              "; ".join(f"{k}: {v}" for k, v in s["recovered"].items() if v not in (None, "")))
             for i, s in enumerate(report["sites"], 1)]
    lines += md_table(("#", "kind", "node", "feeds", "recovered"), sites)
    faults = [(str(i), f["fault"], f["detail"]) for i, s in enumerate(report["sites"], 1) for f in s["faults"]]
    faults += [("exporter", f["fault"], f["detail"]) for f in report["exporter_faults"] or []]
    faults += [("export metadata", f["fault"], f["detail"]) for f in (report.get("export_metadata") or {}).get("faults", [])]
    lines += [f"{report['faults']} fault(s)", ""] + (md_table(("#", "fault", "detail"), faults) if faults else [])
    return "\n".join(lines + [f"- {md_text(note)}" for note in report.get("notes", [])]) + "\n"
