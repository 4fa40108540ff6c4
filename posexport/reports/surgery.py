"""Markdown of the surgery reports: the doctor's sites and faults, and whole-model parity rows."""

from __future__ import annotations

from typing import Any

from .markdown import md_table


def doctor_markdown(report: dict[str, Any]) -> str:
    """Sites (kind, node, what was recovered) and every fault with its numbers."""
    exporter = report["exporter"]
    lines = [f"# Positional-encoding sites of `{report['model']}`", "",
             f"Written by {exporter['name']}{' ' + exporter['version'] if exporter['version'] else ''} ({'; '.join(exporter['evidence'])}).", ""]
    sites = [(str(i), s["kind"], s["node"], f"{len(s['feeds'])} node(s)",
              "; ".join(f"{k}: {v}" for k, v in s["recovered"].items() if v not in (None, "")))
             for i, s in enumerate(report["sites"], 1)]
    lines += md_table(("#", "kind", "node", "feeds", "recovered"), sites)
    faults = [(str(i), f["fault"], f["detail"]) for i, s in enumerate(report["sites"], 1) for f in s["faults"]]
    faults += [("exporter", f["fault"], f["detail"]) for f in report["exporter_faults"] or []]
    lines += [f"{report['faults']} fault(s)", ""] + (md_table(("#", "fault", "detail"), faults) if faults else [])
    return "\n".join(lines + [f"- {note}" for note in report.get("notes", [])]) + "\n"


def parity_markdown(report: dict[str, Any]) -> str:
    """One row per runtime, case and output: the error (max|out − ref| / max(1, max|ref|)) and verdict."""
    lines = [f"# `{report['model']}` against {report['reference']}", "",
             f"Error: max|out − ref| / max(1, max|ref|), tolerance {report['tolerance']:g}.", ""]
    rows = []
    for row in report["rows"]:
        error = f"{row['error']:.2e}" if "error" in row else "—"
        original = row.get("original_fails") or (f"{row['original_error']:.2e}" if "original_error" in row else "")
        failure = row["model_fails"] and f"model fails: {row['model_fails']}" or row["reference_fails"] and f"reference fails: {row['reference_fails']}"
        rows.append((row["runtime"], row["case"], row["output"], error, original, ("ok" if row["ok"] else "FAIL") + (f" ({failure})" if failure else "")))
    lines += md_table(("runtime", "case", "output", "error", "original", "result"), rows)
    return "\n".join(lines)
