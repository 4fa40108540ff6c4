"""Markdown of the doctor's report: sites and faults (whole-model parity renders as every verdict does,
posexport.reports.parity)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from .escape import md_code, md_text, xml_text
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


def doctor_junit(report: dict[str, Any]) -> str:
    """JUnit XML of the doctor's report, for CI systems: one testcase per site (a failure per fault, notes as
    system-out), one per known exporter fault, and one for the model as a whole when no site was found."""
    root = ET.Element("testsuites", name="posexport doctor")
    model = xml_text(str(report["model"]))  # names from the model: never an ill-formed document
    suite = ET.SubElement(root, "testsuite", name=f"doctor.{model}")
    cases: list[tuple[str, list[str], list[str]]] = [
        (f"site {i}: {s['kind']} at {xml_text(s['node'])}", [xml_text(f"{f['fault']}: {f['detail']}") for f in s["faults"]],
         [xml_text(n) for n in s["notes"]])
        for i, s in enumerate(report["sites"], 1)]
    cases += [(f"exporter fault {f['fault']}", [xml_text(f"{f['fault']}: {f['detail']}")], []) for f in report["exporter_faults"] or []]
    if not report["sites"]:
        cases.append(("positional-encoding sites", [], [xml_text(n) for n in report.get("notes", [])]))
    for name, faults, notes in cases:
        tc = ET.SubElement(suite, "testcase", classname=f"doctor.{model}", name=name)
        for fault in faults:
            ET.SubElement(tc, "failure", message=fault[:500]).text = fault
        if notes:
            ET.SubElement(tc, "system-out").text = "\n".join(notes)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(bool(f) for _, f, _ in cases)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
