"""Verdict reports, for graph parity and whole-model parity alike: a terminal view (rich), JUnit XML for
CI systems, and Markdown for pull requests (JSON is the report's own codec, posexport.verdicts.to_json). Every view states, per runtime, the observed error
and the smallest tolerance that would have passed, and names the failing cases with their lengths and
positions.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from rich.markup import escape
from rich.table import Table

from ..verdicts import CaseResult, Generation, NotCompared, PropertyOutcome, Report, TokenAgreement
from .escape import md_code, md_text, xml_text
from .markdown import md_table
from .terminal import fits, keyed_headers, plural, table


@dataclass(frozen=True)
class RuntimeSummary:
    graph: str
    runtime: str
    passed: int
    total: int
    # The largest normalised error over the runtime's cases: the smallest tolerance that passes them all.
    worst_error: float
    worst_case: str
    worst_bound: float  # the bound at that case
    failing: tuple[str, ...]
    errors: int  # cases where the runtime raised: no error was measured there

    @property
    def worst(self) -> str:
        """The smallest passing tolerance, unless some case raised (then no tolerance passes)."""
        return f"none ({self.errors} raised)" if self.errors else fmt(self.worst_error)


def summarise(report: Report) -> list[RuntimeSummary]:
    groups: dict[tuple[str, str], list[CaseResult]] = {}
    for r in [*report.results, *report.pairwise]:
        groups.setdefault((r.graph, r.runtime), []).append(r)
    out = []
    for (graph, runtime), rows in groups.items():
        measured = [r for r in rows if r.comparison is not None]
        worst = max(measured, key=lambda r: r.comparison.normalised, default=None)
        raised = [r for r in rows if r.status == "error"]
        if raised:  # no tolerance passes a case that raised: point at the first one instead
            worst = None
        out.append(RuntimeSummary(
            graph, runtime, sum(r.status == "pass" for r in rows), len(rows),
            worst.comparison.normalised if worst else float("inf"), worst.case if worst else (raised[0].case if raised else ""),
            worst.comparison.bound if worst else float("nan"),
            tuple(r.case for r in rows if r.status != "pass"), sum(r.status == "error" for r in rows),
        ))
    return out


def where(r: CaseResult) -> str:
    """The lengths a case covers, e.g. `batch 3, seq 17, positions ≤ 100016`."""
    axes = ", ".join(f"{k} {v}" for k, v in r.axes.items())
    return axes + (f", positions ≤ {r.largest_position}" if r.largest_position is not None else "")


def subject(r: CaseResult) -> str:
    """The case, and for a whole model the output it judges."""
    return f"{r.case}: {r.output}" if r.output else r.case


def outcome(r: CaseResult) -> str:
    if r.comparison is None or r.status == "error":
        return r.message
    c = r.comparison
    at = f" at position {r.position}" if r.position is not None else ""
    floor = f" (floor {r.floor:.2e})" if r.floor is not None else ""
    aligned = f"; {r.note}" if r.note else ""
    tokens = f"; next token {agreement(r.tokens)}" if r.tokens is not None else ""
    return f"error {c.normalised:.2e}{at} (max abs {c.max_abs:.2e}, p99 {c.p99:.2e}) vs bound {c.bound:.1e}{floor}{aligned}{tokens}"


def agreement(t: TokenAgreement) -> str:
    """Teacher-forced next-token agreement, e.g. `297/300 (99.0%); disagreements at margins 1.2e-03…4.5e-02, first at position 12`."""
    line = f"{t.agreed}/{t.positions} ({100 * t.share:.1f}%)"
    if t.smallest_margin is None:
        return line
    return (f"{line}; where they differ the reference's top-1 − top-2 margin is {t.smallest_margin:.2e}…{t.largest_margin:.2e}, "
            f"first at position {t.first_disagreement}")


def generated(g: Generation) -> str:
    """Greedy decoding in one line: how many steps agreed, the first divergence, the largest logits gap."""
    if g.message and not g.steps:
        return g.message
    first = (f"; first divergence at step {g.first_divergence}: the model's token {g.tokens[0]}, transformers' {g.tokens[1]} "
             f"(its top-1 − top-2 margin {g.margin:.2e})") if g.first_divergence is not None and g.tokens else ""
    stopped = f"; stopped: {g.message}" if g.message else ""
    return (f"{g.agreed}/{g.steps} greedy tokens agree with transformers{first}; largest logits gap {g.largest_gap:.2e} "
            f"at step {g.gap_step}{stopped}")


def tokens_line(report: Report) -> str:
    """The token verdict users read, beside the numeric one: the least next-token agreement of any logits
    and the greedy decodes (none when no logits were compared)."""
    tallies = [(r, r.tokens) for r in report.results if r.tokens is not None]
    if not tallies and not report.generations:
        return ""
    parts = []
    if tallies:
        r, least = min(tallies, key=lambda item: (item[1].share, item[0].case))
        parts.append(f"next-token agreement {100 * least.share:.1f}% at worst ({r.case}, {r.runtime}: {least.agreed}/{least.positions})")
    if report.generations:
        agreed, steps = sum(g.agreed for g in report.generations), sum(g.steps for g in report.generations)
        diverged = sum(g.first_divergence is not None for g in report.generations)
        parts.append(f"greedy decoding {agreed}/{steps} tokens agree ({diverged} of {len(report.generations)} decodes diverge)")
    return "tokens: " + "; ".join(parts)


def verdict_line(report: Report) -> str:
    n = report.counts()
    props = report.properties
    bad_props = sum(p.status in ("fail", "error") for p in props)
    limited = sum(p.status == "limitation" for p in props)
    skipped = f"{plural(len(report.not_compared), 'output')} not compared; " if report.not_compared else ""
    unavailable = f"{plural(len(report.unavailable), 'runtime')} unavailable"
    if not report.results:
        return f"FAIL: nothing was compared ({skipped}{unavailable})"
    held = (f"properties {len(props) - bad_props - limited}/{len(props)} hold ({plural(limited, 'known limitation')}); "
            if props else "")
    return (
        f"{'PASS' if report.passed else 'FAIL'}: {n['pass']} passed, {n['fail']} failed, {plural(n['error'], 'error')}; "
        f"{held}{skipped}{unavailable}"
    )


def strict_line(report: Report) -> str:
    """The verdict under --strict: a pass with an unavailable runtime, an output not compared or a known
    limitation is a failure."""
    line = verdict_line(report)
    if report.passed and not report.strictly_passed():
        limited = sum(p.status == "limitation" for p in report.properties)
        return ("FAIL (--strict)" + line[len("PASS"):] + f" — --strict fails on {plural(len(report.unavailable), 'unavailable runtime')}, "
                f"{plural(len(report.not_compared), 'output')} not compared and {plural(limited, 'known limitation')}")
    return line


def header(label: str, m: dict, details: bool = False) -> str:
    """A subject's line: a whole model and its reference, or a graph with its parameters (those set; every one with
    --details)."""
    if m.get("kind") == "model":
        original = f"; original {m['original']}" if m.get("original") else ""
        return f"[bold]{escape(label)}[/]: whole model {escape(str(m.get('model')))} against {escape(str(m.get('reference')))}{escape(original)}"
    params = m.get("params", {})
    shown = ", ".join(f"{k} {json.dumps(v)}" for k, v in sorted(params.items()) if details or v not in (None, [], ""))
    left = sum(v in (None, [], "") for v in params.values())
    unset = f" (+{left} unset; --details lists every parameter)" if left and not details else ""
    return f"[bold]{label}[/]: {m.get('source')}, {m.get('backend')}, opset {m.get('opset')}; {escape(shown)}{unset}"


def fmt(value: float) -> str:
    return f"{value:.2e}" if value == value and value != float("inf") else "—"


# --- terminal ---------------------------------------------------------------------------------------


def render_terminal(report: Report, console, details: bool = False, strict: bool = False) -> None:
    """Per subject: a line naming it, a table per runtime (and per pair), failing cases with their lengths,
    properties as a runtime grid, outputs not compared; then unavailable runtimes and the verdict."""
    summaries = summarise(report)
    for label, m in report.graphs.items():
        console.print(header(label, m, details), highlight=False)
        for pairs in (False, True):
            rows = [s for s in summaries if s.graph == label and (" vs " in s.runtime) == pairs]
            if rows:
                console.print(runtime_table(rows, pairs))
        if m.get("kind") == "model":
            print_model(report, label, console)
        else:
            shown = [r for r in [*report.results, *report.pairwise] if r.graph == label and (details or r.status != "pass")]
            if shown:
                console.print(cases_table(shown, details))
        outcomes = [p for p in report.properties if p.graph == label]
        if outcomes:
            grid = properties_grid(outcomes)
            if fits(grid, console):
                console.print(grid)
            else:  # more runtimes than the terminal's columns hold: numbered, with the key below
                console.print(properties_grid(outcomes, abbreviated=True))
                console.print(keyed_headers(list(dict.fromkeys(p.runtime for p in outcomes)))[1], highlight=False)
            for p in outcomes:
                if p.status != "pass":
                    console.print(f"  {p.property} on {p.runtime}: {escape(p.detail)}", highlight=False)
        skipped = [n for n in report.not_compared if n.graph == label]
        if skipped:
            console.print(not_compared_table(skipped))
    for name, note in report.notes.items():
        console.print(f"[yellow]note on {name}[/]: {escape(note)}", highlight=False)
    for name, why in report.unavailable.items():
        console.print(f"[yellow]{name} unavailable[/]: {escape(why)}", highlight=False)
    if tokens_line(report):
        console.print(escape(tokens_line(report)), highlight=False)
    passed = report.strictly_passed() if strict else report.passed
    console.print(f"[{'green' if passed else 'red'}]{escape(strict_line(report) if strict else verdict_line(report))}[/]", highlight=False)


def settings_line(report: Report) -> str:
    """What a whole-model run was fed and how it was bounded."""
    s = report.settings
    factor = s.get("floor_factor")
    floor = f"; bound max({s.get('tolerance')}, {factor:g} × floor), the floor: {s.get('floor_reference')} on the same feeds" if factor else ""
    return f"inputs: {s.get('inputs', 'random token ids')}{floor}"


def print_model(report: Report, label: str, console) -> None:
    """A whole model's outputs (every one: its error, floor, bound, worst position and next-token
    agreement) and its greedy decodes."""
    console.print(escape(settings_line(report)), highlight=False)
    rows = [r for r in report.results if r.graph == label]
    if rows:
        console.print(outputs_table(rows))
    decodes = [g for g in report.generations if g.graph == label]
    if decodes:
        decoded = table(("case", "runtime", "how the model ran", "tokens"), ("runtime",),
                        f"greedy decoding ({report.settings.get('generate')} tokens after each prompt), transformers following the model's tokens")
        for g in decodes:
            decoded.add_row(g.case, g.runtime, g.cache, escape(generated(g)))
        console.print(decoded)


def outputs_table(rows: list[CaseResult]) -> Table:
    originals = any(r.original for r in rows)
    columns = ("case", "output", "runtime", "status", "error", "floor", "bound", "at position", "next token", *(["original"] if originals else []))
    out = table(columns, ("runtime", "status", "floor", "bound", "at position"),
                "outputs: error = max|out − ref| / max(1, max|ref|) ≤ bound = max(absolute, c × floor)")
    for r in rows:
        style = "green" if r.status == "pass" else "red"
        c = r.comparison
        error = (fmt(c.normalised) if c is not None and r.status != "error" else escape(r.message))
        out.add_row(r.case, escape(r.output) + (f" ({escape(r.note)})" if r.note else ""), r.runtime, f"[{style}]{r.status}[/]", error,
                    fmt(r.floor) if r.floor is not None else "—", fmt(c.bound) if c is not None else "—",
                    str(r.position) if r.position is not None else "—", escape(agreement(r.tokens)) if r.tokens else "",
                    *([escape(r.original)] if originals else []))
    return out


def runtime_table(rows: list[RuntimeSummary], pairs: bool) -> Table:
    """One row per runtime (or pair of runtimes): cases passed, worst error, its bound and case."""
    title = ("runtime pairs: max|a − b| / max(1, max|b|) ≤ 2 × the bound" if pairs
             else "error = max|out − ref| / max(1, max|ref|) ≤ bound; the error is the smallest tolerance that passes")
    name = "runtimes" if pairs else "runtime"
    out = table((name, "cases", "worst error", "bound there", "at case", "failing cases"), (name, "cases", "worst error", "bound there"), title)
    for s in rows:
        style = "green" if s.passed == s.total else "red"
        failing = ", ".join(s.failing[:5]) + (f" … (+{len(s.failing) - 5})" if len(s.failing) > 5 else "")
        out.add_row(s.runtime, f"[{style}]{s.passed}/{s.total}[/]", s.worst, fmt(s.worst_bound), s.worst_case, failing)
    return out


def cases_table(shown: list[CaseResult], details: bool) -> Table:
    outputs, originals = any(r.output for r in shown), any(r.original for r in shown)
    columns = ("case", *(["output"] if outputs else []), "runtime", "status", "lengths", "outcome", *(["original"] if originals else []))
    out = table(columns, ("runtime", "status"), "cases" if details else "failing cases")
    for r in shown:
        style = "green" if r.status == "pass" else "red"
        out.add_row(r.case, *([escape(r.output)] if outputs else []), r.runtime, f"[{style}]{r.status}[/]", where(r),
                    escape(outcome(r)), *([escape(r.original)] if originals else []))
    return out


def not_compared_table(skipped: list[NotCompared]) -> Table:
    """Outputs no oracle value exists for: one row per output and reason (cases and runtimes counted)."""
    groups: dict[tuple[str, str], int] = {}
    for n in skipped:
        groups[(n.output, n.reason)] = groups.get((n.output, n.reason), 0) + 1
    out = table(("output", "times", "why"), ("times",), "not compared (neither a pass nor a failure)")
    for (output, reason), times in groups.items():
        out.add_row(escape(output), str(times), escape(reason))
    return out


def properties_grid(outcomes: list[PropertyOutcome], abbreviated: bool = False) -> Table:
    """Properties down, runtimes across: holds, FAILS, error or known limit; ``abbreviated``: the runtimes'
    columns numbered (keyed_headers gives the key)."""
    runtimes = list(dict.fromkeys(p.runtime for p in outcomes))
    headers = keyed_headers(runtimes)[0] if abbreviated else runtimes
    grid = table(("property", *headers), headers, "properties, checked on each runtime's outputs")
    marks = {"pass": "[green]holds[/]", "fail": "[red]FAILS[/]", "error": "[red]error[/]", "limitation": "[yellow]known limit[/]"}
    for prop in dict.fromkeys(p.property for p in outcomes):
        status = {p.runtime: p.status for p in outcomes if p.property == prop}
        grid.add_row(prop, *(marks[status[name]] if name in status else "" for name in runtimes))
    return grid


# --- JUnit XML --------------------------------------------------------------------------------------


def to_junit(report: Report) -> str:
    """One testsuite per graph; a testcase per (case, runtime), per pair, per (property, runtime), and a
    skipped testcase per unavailable runtime. Known limitations pass, with the note as system-out."""
    root = ET.Element("testsuites", name="posexport parity")
    for graph in report.graphs:
        suite = ET.SubElement(root, "testsuite", name=f"parity.{graph}")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}

        def case(classname: str, name: str, status: str, message: str = "", note: str = "") -> None:
            counts["tests"] += 1
            tc = ET.SubElement(suite, "testcase", classname=classname, name=name)
            if status == "fail":
                counts["failures"] += 1
                ET.SubElement(tc, "failure", message=message[:500]).text = message
            elif status == "error":
                counts["errors"] += 1
                ET.SubElement(tc, "error", message=message[:500]).text = message
            elif status == "skipped":
                counts["skipped"] += 1
                ET.SubElement(tc, "skipped", message=message[:500])
            if note:
                ET.SubElement(tc, "system-out").text = note

        for r in [*report.results, *report.pairwise]:
            if r.graph == graph:
                note = report.notes.get(r.runtime, "")
                message = f"{r.runtime} {subject(r)} [{where(r)}]: {outcome(r)}" + (f" (note: {note})" if note else "")
                case(f"parity.{graph}.{r.runtime}", subject(r), r.status, message, message if r.status == "pass" else "")
        for g in report.generations:
            if g.graph == graph:  # reported, never judged: the numeric bound decides
                case(f"parity.{graph}.{g.runtime}.generation", f"{g.case}: greedy decoding", "pass", note=generated(g))
        for n in report.not_compared:
            if n.graph == graph:
                case(f"parity.{graph}.{n.runtime}", f"{n.case}: {n.output}", "skipped", f"not compared: {n.reason}")
        for p in report.properties:
            if p.graph == graph:
                status = "pass" if p.status == "limitation" else p.status
                case(f"parity.{graph}.{p.runtime}.properties", p.property, status, f"{p.runtime} {p.property}: {p.detail}",
                     p.detail if p.status == "limitation" else "")
        for name, why in report.unavailable.items():
            case(f"parity.{graph}.{name}", "available", "skipped", why)
        for k, v in counts.items():
            suite.set(k, str(v))
    for element in root.iter():  # names and messages may hold characters XML forbids (a control byte)
        element.text = xml_text(element.text) if element.text else element.text
        for key, value in element.attrib.items():
            element.set(key, xml_text(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# --- Markdown ---------------------------------------------------------------------------------------


def to_markdown(report: Report) -> str:
    lines = [f"# posexport parity: {'PASS' if report.passed else 'FAIL'}", "", verdict_line(report), ""]
    for label, m in report.graphs.items():
        if m.get("kind") == "model":
            lines.append(f"- **{md_text(label)}**: whole model {md_code(m.get('model'))} against {md_text(m.get('reference'))}")
            continue
        lines.append(f"- **{md_text(label)}**: " + md_text(f"{m.get('encoding')} {m.get('dtype')}, {m.get('source')}, {m.get('backend')}, "
                     f"opset {m.get('opset')}, ") + f"sha256 {md_code(str(m.get('sha256', ''))[:12])}")
    if any(m.get("kind") == "model" for m in report.graphs.values()):
        lines += ["", f"- {md_text(settings_line(report))}"]
    if tokens_line(report):
        lines += ["", md_text(tokens_line(report))]
    lines += ["", "## Runtimes", ""]
    lines += md_table(
        ("graph", "runtime", "cases passed", "smallest passing tolerance (worst error)", "at case", "its bound", "failing cases"),
        ((s.graph, s.runtime, f"{s.passed}/{s.total}", s.worst, s.worst_case, fmt(s.worst_bound), ", ".join(s.failing))
         for s in summarise(report)),
    )
    model_rows = [r for r in report.results if report.graphs.get(r.graph, {}).get("kind") == "model"]
    if model_rows:
        lines += ["## Outputs", ""]
        lines += md_table(("subject", "case", "output", "runtime", "status", "error", "floor", "bound", "at position", "next token"),
                          ((r.graph, r.case, r.output + (f" ({r.note})" if r.note else ""), r.runtime, r.status,
                            fmt(r.comparison.normalised) if r.comparison is not None and r.status != "error" else r.message,
                            fmt(r.floor) if r.floor is not None else "—", fmt(r.comparison.bound) if r.comparison else "—",
                            str(r.position) if r.position is not None else "—", agreement(r.tokens) if r.tokens else "")
                           for r in model_rows))
    if report.generations:
        lines += ["## Greedy decoding", ""]
        lines += md_table(("subject", "case", "runtime", "how the model ran", "tokens"),
                          ((g.graph, g.case, g.runtime, g.cache, generated(g)) for g in report.generations))
    if report.failures():
        lines += ["## Failing cases", ""]
        lines += md_table(("subject", "case", "runtime", "status", "lengths", "outcome"),
                          ((r.graph, subject(r), r.runtime, r.status, where(r), outcome(r)) for r in report.failures()))
    if report.not_compared:
        lines += ["## Not compared", ""]
        lines += md_table(("subject", "case", "output", "runtime", "why"),
                          ((n.graph, n.case, n.output, n.runtime, n.reason) for n in report.not_compared))
    if report.properties:
        lines += ["## Properties", ""]
        lines += md_table(("graph", "property", "runtime", "status", "detail"),
                          ((p.graph, p.property, p.runtime, p.status, p.detail) for p in report.properties))
    if report.notes:
        lines += ["## Notes", ""]
        lines += [f"- {md_code(name)}: {md_text(note)}" for name, note in report.notes.items()] + [""]
    if report.unavailable:
        lines += ["## Unavailable runtimes", ""]
        lines += [f"- {md_code(name)}: {md_text(why)}" for name, why in report.unavailable.items()] + [""]
    return "\n".join(lines)
