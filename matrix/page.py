"""docs/compatibility.md from the matrix's JSON: one table of verdicts (architecture × exporter), then
one row per cell with what was found and measured, and the reason of every cell that is not FIXED."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from posexport.reports.markdown import md_table

from .models import ARCHITECTURES

LOCK = Path(__file__).resolve().parents[1] / "locks" / "project.txt"

VERDICTS = ("FIXED", "NOTHING TO PATCH", "NOT FIXED", "UNVERIFIED", "REFUSED", "EXPORT WRONG", "EXPORT FAILED", "NOT JUDGED")
# The key on the page: what each verdict means, and what the column "without the patch" can say.
KEY = [
    ("FIXED", "patched, and within the bound of float64 transformers at both prompts"),
    ("NOTHING TO PATCH", "the only sites are trained tables (learned positions): exact within their rows, nothing past them "
                         "to be exact to; `posexport patch --extend-learned N` grows them on request"),
    ("NOT FIXED", "patched, but the patched model fails or drifts (the reason says where)"),
    ("UNVERIFIED", "patched, but float64 transformers cannot judge the model (the reason says why)"),
    ("REFUSED", "doctor or patch refuses a site: a pattern posexport does not know yet"),
    ("EXPORT WRONG", "the original is already off float64 transformers inside the trained length, and the patched model as much: "
                     "the exporter's own fault, not a positional one"),
    ("EXPORT FAILED", "the exporter itself failed (its own last error line)"),
    ("NOT JUDGED", "the exporter is not run on this row (the reason says why)"),
]
UNPATCHED_KEY = [
    ("raises at position N", "onnxruntime raises once a call reaches position N (the doctor's position limit): patch it to "
                             "go past N"),
    ("error over the bound from an N-token prompt", "the original runs but its logits are off float64 transformers by more "
                                                    "than the bound from a prompt of N tokens (bisected); the greedy step "
                                                    "after it where its tokens part from transformers' follows: patch it"),
    ("nothing within max positions", "the original is within the bound up to every prompt run: patching changes nothing "
                                     "you would see, unless you need more positions"),
]


def error_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return "fails" if value.startswith("fails") else value
    return f"{value:.1e}"


def errors_text(cell: dict[str, Any]) -> str:
    errors = cell.get("errors") or {}
    ordered = sorted(errors.items(), key=lambda item: int(item[0]))  # the JSON sorts its keys as text
    return "; ".join(f"{prompt}: {error_text(e['before'])} → {error_text(e['after'])}" for prompt, e in ordered) or "—"


def cell_row(cell: dict[str, Any]) -> list[str]:
    ratio = cell.get("time_ratio")
    return [cell["architecture"], cell["exporter"], "yes" if cell["exported"] else "no",
            ", ".join(cell.get("sites", [])) or ("—" if not cell["exported"] else "none"),
            ", ".join(cell.get("faults", [])) or "—", cell["verdict"], cell.get("unpatched") or "—", errors_text(cell),
            "—" if ratio is None else f"{ratio:.2f}×", cell.get("reason", "")]


def key_lines() -> list[str]:
    lines = ["## Key", "", "Verdicts:", ""] + md_table(["verdict", "meaning"], [list(k) for k in KEY])
    lines += ["Without the patch (what the original export does, before posexport touches it):", ""]
    return lines + md_table(["says", "meaning"], [list(k) for k in UNPATCHED_KEY])


def index_lines(cells: list[dict[str, Any]]) -> list[str]:
    """Per config.json model_type: the exporters whose export posexport leaves right (FIXED, NOTHING TO PATCH), and the
    others with their verdicts."""
    good = ("FIXED", "NOTHING TO PATCH")
    types = dict.fromkeys(c.get("model_type", c["architecture"]) for c in cells)
    rows = []
    for model_type in types:
        mine = [c for c in cells if c.get("model_type", c["architecture"]) == model_type]
        fine = sorted({c["exporter"] for c in mine if c["verdict"] in good})
        rest = sorted({f"{c['exporter']} ({c['verdict']})" for c in mine if c["verdict"] not in good})
        rows.append([f"`{model_type}`", ", ".join(dict.fromkeys(c["architecture"] for c in mine)), ", ".join(fine) or "—",
                     ", ".join(rest) or "—"])
    return ["## By model type", "", "My config.json says `model_type: X`: which exporters' models does posexport leave right "
            "(FIXED, or NOTHING TO PATCH), and what of the others? The rows are in [Cells](#cells).", ""] + md_table(
        ["model_type", "rows", "fixed or nothing to patch", "the others"], rows)


def counts(cells: list[dict[str, Any]]) -> str:
    found = {v: sum(c["verdict"] == v for c in cells) for v in VERDICTS}
    return ", ".join(f"{v} {n}" for v, n in found.items() if n)


def lock_note(versions: dict[str, str]) -> str:
    """Whether the page was made with the project's lock: its versions against locks/project.txt's."""
    locked = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+) ", LOCK.read_text(), re.MULTILINE))
    differ = [f"{k} {v} (lock: {locked[k]})" for k, v in versions.items() if k in locked and locked[k] != v]
    if differ:
        return (f" — made before the current lock, locks/project.txt, which differs in {', '.join(differ)}: "
                "`make matrix` remakes the page with it")
    return " (the project's lock, locks/project.txt; the exporters' venvs: locks/optimum.txt, locks/mobius.txt)"


def rerun_lines(rerun: dict[str, Any], versions: dict[str, str]) -> list[str]:
    """What a later ``--rerun`` ran again: its command, when, how long, and its versions where they differ."""
    changed = {k: v for k, v in rerun["versions"].items() if versions.get(k) != v}
    differ = ("; versions that differ: " + ", ".join(f"{k} {v}" for k, v in changed.items())) if changed else ""
    cells = f"{rerun['cells']} cell{'' if rerun['cells'] == 1 else 's'}"
    return [f"Re-run {rerun['time_utc']} UTC, {rerun['seconds'] / 60:.1f} min: {cells}, "
            f"`{rerun['command']}`{differ}.", ""]


def row_config(name: str) -> tuple[str, str]:
    """(model_type, rope) of a row, as a user finds them in their config.json: `llama`, `llama3 ×8`."""
    architecture = ARCHITECTURES.get(name)
    if architecture is None:
        return "", ""
    config = architecture.config
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type") or scaling.get("type") or "default"
    factor = f" ×{scaling['factor']:g}" if scaling.get("factor") else ""
    return config["model_type"], kind + factor


def render(data: dict[str, Any]) -> str:
    meta, cells = data["meta"], data["cells"]
    architectures = list(dict.fromkeys(c["architecture"] for c in cells))
    exporters = list(dict.fromkeys(c["exporter"] for c in cells))
    by = {(c["architecture"], c["exporter"]): c for c in cells}
    lines = ["# Compatibility: exporters × architectures", "",
             "Generated by the command below (do not edit by hand); the same data is in "
             "[compatibility.json](compatibility.json). How it is made: [matrix.md](matrix.md).", "",
             "```sh", "make matrix    # runs: " + meta["command"], "```", "",
             f"Run {meta['time_utc']} UTC, {meta['seconds'] / 60:.1f} min on {meta['cpu_count']} CPU(s); "
             f"{len(cells)} of {meta.get('cells_planned', len(cells))} cells run: {counts(cells)}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + lock_note(meta["versions"]), ""]
    lines += [line for rerun in meta.get("reruns", []) for line in rerun_lines(rerun, meta["versions"])]
    lines += [f"- `{name}`: {label}" for name, label in meta["exporters"].items()] + [""]
    lines += key_lines() + ["## Verdicts", ""]
    lines += ["Find your model by its config.json's `model_type` and rope scaling (`rope_scaling`/`rope_parameters`' "
              "rope_type); each row is a tiny model of that type, exported by each exporter, then doctor → patch → model-parity. "
              "A model_type `posexport build --from-model` reads but no row here shows is not checked through exporters yet "
              "([models.md](models.md)).", ""]
    lines += md_table(["architecture", "model_type", "rope", *exporters],
                      [[a, *row_config(a), *(by[(a, e)]["verdict"] if (a, e) in by else "" for e in exporters)] for a in architectures])
    lines += index_lines(cells)
    lines += ["## Cells", "",
              "Errors: max|logits − transformers float64| / max(1, max|ref|) at a prompt inside the trained length and one past "
              "max_position_embeddings, original → patched (`fails`: onnxruntime raised). Without the patch: see the [key](#key). "
              "Run time: the patched model over the original at the first prompt.", ""]
    header = ["architecture", "exporter", "exported", "sites", "faults", "verdict", "without the patch", "error before → after",
              "run time", "reason"]
    lines += md_table(header, [cell_row(by[(a, e)]) for a in architectures for e in exporters if (a, e) in by])
    return "\n".join(lines)
