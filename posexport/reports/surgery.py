"""Markdown of the doctor's report: sites and faults (whole-model parity renders as every verdict does,
posexport.reports.parity)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
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


def doctor_junit(report: dict[str, Any]) -> str:
    """JUnit XML of the doctor's report, for CI systems: one testcase per site (a failure per fault, notes as
    system-out), one per known exporter fault, and one for the model as a whole when no site was found."""
    root = ET.Element("testsuites", name="posexport doctor")
    suite = ET.SubElement(root, "testsuite", name=f"doctor.{report['model']}")
    cases: list[tuple[str, list[str], list[str]]] = [
        (f"site {i}: {s['kind']} at {s['node']}", [f"{f['fault']}: {f['detail']}" for f in s["faults"]], s["notes"])
        for i, s in enumerate(report["sites"], 1)]
    cases += [(f"exporter fault {f['fault']}", [f"{f['fault']}: {f['detail']}"], []) for f in report["exporter_faults"] or []]
    if not report["sites"]:
        cases.append(("positional-encoding sites", [], list(report.get("notes", []))))
    for name, faults, notes in cases:
        tc = ET.SubElement(suite, "testcase", classname=f"doctor.{report['model']}", name=name)
        for fault in faults:
            ET.SubElement(tc, "failure", message=fault[:500]).text = fault
        if notes:
            ET.SubElement(tc, "system-out").text = "\n".join(notes)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(bool(f) for _, f, _ in cases)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
