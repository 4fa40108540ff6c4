"""`posexport bench --model FIXED --against ORIGINAL` as a terminal table and as Markdown (with the
command, the machine and its load); the JSON is ModelBench.as_dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..bench.models import ModelBench, target
from ..files import write_outputs
from .bench import command_block, fmt, machine_line, versions_line
from .escape import md_code
from .markdown import md_table

COLUMNS = ("call", "--model ms", "IQR", "--against ms", "IQR", "ratio", "note")


def rows(result: ModelBench) -> list[tuple[str, ...]]:
    return [(r.call, fmt(r.model_ms), fmt(r.model_iqr_ms), fmt(r.against_ms), fmt(r.against_iqr_ms), fmt(r.ratio, 3), r.note)
            for r in result.rows]


def target_line(result: ModelBench) -> str:
    t = target(result.rows)
    worst = f"worst {t['worst']['ratio']}× at {t['worst']['call']}" if t["worst"] else "no call timed"
    return f"target {t['target']}: {'met' if t['met'] else 'MISSED'} ({worst})"


def sizes_line(result: ModelBench) -> str:
    m = result.meta
    return f"file size: --model {m['model_bytes']:,} bytes, --against {m['against_bytes']:,} bytes ({m['model_bytes'] / m['against_bytes']:.3f}×)"


def markdown(result: ModelBench) -> str:
    m = result.meta
    lines = ["# posexport bench --model", "", *command_block(m)]
    lines += [f"{md_code(m['model'])} against {md_code(m['against'])}, interleaved round-robin in one process. " + machine_line(m), "",
              versions_line(m), ""]
    lines += md_table(COLUMNS, rows(result))
    return "\n".join(lines + [sizes_line(result), "", target_line(result), ""])


def render_terminal(result: ModelBench, console: Any) -> None:
    from .terminal import table

    timed = table(COLUMNS, COLUMNS[:-1], f"{result.meta['model']} against {result.meta['against']}")
    for row in rows(result):
        timed.add_row(*row)
    console.print(timed)
    console.print(sizes_line(result))
    console.print(target_line(result))


def write_reports(result: ModelBench, json_out: str | Path | None, markdown_out: str | Path | None) -> None:
    write_outputs([(path, render(), option) for path, render, option in (
        (json_out, lambda: json.dumps(result.as_dict(), indent=2) + "\n", "--json"),
        (markdown_out, lambda: markdown(result), "--markdown")) if path])
