"""Bench results as a terminal table (rich), Markdown (with the command, the machine and its load) and a
PNG plot; JSON is BenchResult.to_json. Every file is written through posexport.files.write_output."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..bench import BenchResult, Row, graph_size_note
from ..errors import PosexportError
from ..files import write_output, write_outputs
from .escape import md_fence, md_text
from .markdown import md_table


def fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def profile_text(profile: list[tuple[str, float]]) -> str:
    return ", ".join(f"{op} {share:.0%}" for op, share in profile)


def command_block(m: dict) -> list[str]:
    """The command that made a recorded run, as a shell block ([] when not recorded)."""
    return ["Command:", "", *md_fence(m["command"], "sh"), ""] if m.get("command") else []


def machine_line(m: dict, threads: str = "thread(s)") -> str:
    """When and on what a run was measured, and how it was timed."""
    return (f"Measured {m['time_utc']} UTC on {m['cpu_count']} CPU(s) ({m['processor']}), load average "
            f"{' / '.join(str(x) for x in m['load_average'])} (1/5/15 min) at the end of the run; "
            f"{m['threads']} {threads}; {m['warmup']} warm-up runs, median of {m['repeats']}.")


def versions_line(m: dict) -> str:
    return "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items())


def header(result: BenchResult) -> list[str]:
    m = result.meta
    lines = ["# posexport bench", "", *command_block(m)]
    lines += [machine_line(m, "thread(s) for every runtime and torch"), "", versions_line(m), ""]
    lines += [f"- {runtime}: {md_text(description)}" for runtime, description in m.get("runtimes", {}).items()]
    lines += [f"- {runtime} not measured: {md_text(why)}" for runtime, why in m.get("skipped_runtimes", {}).items()]
    return lines + [""]


def title(r: Row) -> str:
    """A group's heading: encoding, layout (rope), runtime, dtype, the first input's shape and, for a
    decode step, its position."""
    layout = f" {r.layout}" if r.layout else ""
    at = f", decode at position {r.position}" if r.position else ""
    return f"{r.encoding}{layout} — {r.runtime}, {r.dtype}, x {r.shape}{at}"


def group_table(rs: list[Row], is_block: bool) -> list[str]:
    r0 = rs[0]
    if is_block:
        lines = [f"## IndexShare attention block — {r0.runtime}, {r0.dtype}, seq {r0.seq}", ""]
        lines += md_table(("subject", "shape (q)", "median ms", "IQR ms", "min ms", "graph bytes", "note"),
                          ((r.subject, str(r.shape), fmt(r.median_ms), fmt(r.iqr_ms), fmt(r.min_ms), str(r.graph_bytes or "—"), r.note) for r in rs))
    else:
        lines = [f"## {title(r0)}", ""]
        lines += md_table(("subject", "median ms", "IQR ms", "min ms", "× copy", "graph bytes", "note"),
                          ((r.subject, fmt(r.median_ms), fmt(r.iqr_ms), fmt(r.min_ms), fmt(r.ratio_to_copy, 2), str(r.graph_bytes or "—"), r.note)
                           for r in rs))
    profiled = [r for r in rs if r.profile]
    if profiled:
        lines += ["Profile (share of node time by op type, onnxruntime profiler):", ""]
        lines += [f"- {r.subject}: {profile_text(r.profile)}" for r in profiled] + [""]
    return lines


def markdown(result: BenchResult, size_note: str | None = None) -> str:
    lines = header(result)
    for key, rs in groups(result).items():
        lines += group_table(rs, key[-1])
    if result.targets:
        lines += ["## Targets (docs/benchmarks.md)", ""]
        lines += md_table(("target", "measured", "limit", "met", "profile of the subject"),
                          ((t["target"], str(t["measured"]), str(t["limit"]), "yes" if t["met"] else "NO — " + t["miss"], t["profile"] or "—")
                           for t in result.targets))
    if size_note:
        lines += ["## Graph size", "", size_note, ""]
    return "\n".join(lines)


def plot_png(result: BenchResult) -> bytes:
    """Time and ratio to the copy against sequence length, one line per subject (and runtime/dtype)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Prefill rows only: a decode step (one token at a large position) has no sequence length to plot against.
    rows = [r for r in result.rows if r.kind != "indexshare" and not r.position and np.isfinite(r.median_ms)]
    if not rows:
        raise PosexportError("--plot: no timed rows to plot")
    series: dict[str, list[Row]] = {}
    several = len({(r.encoding, r.layout, r.runtime, r.dtype) for r in rows}) > 1
    for r in rows:
        series.setdefault(r.subject + (f" [{r.encoding} {r.layout} {r.runtime} {r.dtype}]".replace("  ", " ") if several else ""), []).append(r)
    fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, rs in series.items():
        rs = sorted(rs, key=lambda r: r.seq)
        style = "--" if rs[0].kind == "baseline" else "-"
        ax_t.plot([r.seq for r in rs], [r.median_ms for r in rs], style, marker="o", label=label)
        ax_r.plot([r.seq for r in rs], [r.ratio_to_copy for r in rs], style, marker="o", label=label)
    for ax, ylabel in ((ax_t, "median time (ms)"), (ax_r, "time / copy")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.set_yscale("log")
    ax_r.axhline(1.0, color="grey", lw=0.8)
    ax_r.legend(fontsize=7, loc="best")
    fig.suptitle(f"posexport bench — {result.meta['threads']} thread(s)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def plot(result: BenchResult, path: str | Path) -> Path:
    return write_output(path, plot_png(result), "--plot")


def write_reports(result: BenchResult, json_out: str | Path | None = None, markdown_out: str | Path | None = None,
                  plot_out: str | Path | None = None) -> None:
    """The files `posexport bench` was asked for; the Markdown closes with the rope graph-size note."""
    note = graph_size_note() if markdown_out and "rope" in result.meta.get("encodings", ()) else None
    write_outputs([(path, render(), option) for path, render, option in (
        (json_out, result.to_json, "--json"), (markdown_out, lambda: markdown(result, note), "--markdown"),
        (plot_out, lambda: plot_png(result), "--plot")) if path])


def groups(result: BenchResult) -> dict[tuple, list[Row]]:
    """Rows timed together (one encoding, layout, position, runtime, dtype and length), in order."""
    out: dict[tuple, list[Row]] = {}
    for r in result.rows:
        out.setdefault((r.encoding, r.layout, r.position, r.runtime, r.dtype, r.seq, r.kind == "indexshare"), []).append(r)
    return out


def render_terminal(result: BenchResult, console) -> None:
    """One table per group of subjects timed together, its shape in the title: the numbers stay whole at any
    terminal width (posexport.reports.terminal)."""
    from .terminal import table

    m = result.meta
    console.print(f"threads {m['threads']}, load average {m['load_average']}, median of {m['repeats']} after {m['warmup']} warm-up runs")
    for rs in groups(result).values():
        r0 = rs[0]
        heading = f"IndexShare attention block — {r0.runtime}, {r0.dtype}, seq {r0.seq}" if r0.kind == "indexshare" else title(r0)
        timed = table(("subject", "median ms", "IQR ms", "× copy", "note"), ("subject", "median ms", "IQR ms", "× copy"), heading)
        for r in rs:
            timed.add_row(r.subject, fmt(r.median_ms), fmt(r.iqr_ms), fmt(r.ratio_to_copy, 2), r.note)
        console.print(timed)
    for runtime, why in m.get("skipped_runtimes", {}).items():
        console.print(f"[yellow]{runtime} skipped[/]: {why}")
    for t in result.targets:
        state = "[green]met[/]" if t["met"] else f"[red]missed[/] ({t['miss']})"
        console.print(f"target {t['target']}: {t['measured']} — {state}")
