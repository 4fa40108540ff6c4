"""`posexport doctor`, `posexport patch` and `posexport model-parity`: model surgery on any exported
model (posexport.surgery holds the logic; this module parses options and renders tables)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from posexport.errors import PosexportError
from posexport.files import check_destination, note_input, write_outputs
from posexport.params import parse_options
from posexport.reports.surgery import doctor_markdown
from posexport.comparison import FLOOR_FACTOR, ROUNDOFF_UNITS, TOLERANCE
from posexport.contract import DEFAULT_MODEL_RUNTIMES as DEFAULT_RUNTIMES
from posexport.contract import DEFAULT_TIMEOUT

from .common import BROWSER_HELP, EXTRA_OPTIONS, ExtraOptions, console, require


def source_options() -> dict[str, Any]:
    return dict(
        from_model=typer.Option(None, "--from-model", help="a transformers model folder (config.json): its rope parameters"),
        from_config=typer.Option(None, "--from-config", help="a model's config.json: its rope parameters"),
        preset=typer.Option("", help="rope of a well-known model (see `posexport list`)"),
        position_limit=typer.Option(None, "--position-limit", help="positions the patched model covers exactly"),
    )


_src = source_options()


def requested(ctx: typer.Context, from_model: Path | None, from_config: Path | None, preset: str) -> dict[str, Any] | None:
    from posexport.surgery import requested_values

    return requested_values(from_model, from_config, preset or None, parse_options(list(ctx.args)))


def site_tables(report: dict[str, Any]) -> list[Table]:
    """The sites (what was found and recovered) and, below, every fault and note with its numbers."""
    from posexport.reports.terminal import table

    sites = table(("#", "kind", "node", "feeds", "recovered"), ("#", "kind"), f"positional-encoding sites of {report['model']}",
                  show_lines=True)
    findings = table(("#", "fault", "detail"), ("#", "fault"), "faults and notes")
    for number, site in enumerate(report["sites"], 1):
        feeds = site["feeds"]
        shown = ", ".join(feeds[:2]) + (f" … ({len(feeds)} nodes)" if len(feeds) > 2 else "")
        recovered = "\n".join(f"{k}: {v}" for k, v in site["recovered"].items() if v not in (None, ""))
        sites.add_row(str(number), site["kind"], escape(site["node"]), escape(shown), escape(recovered))
        for fault in site["faults"]:
            findings.add_row(str(number), fault["fault"], escape(fault["detail"]))
        for note in site["notes"]:
            findings.add_row(str(number), "(note)", escape(note))
    return [sites, findings]


def doctor_command(
    ctx: typer.Context,
    model: Path = typer.Argument(..., help="the .onnx model (external data is read from beside it)"),
    from_model: Path = _src["from_model"],
    from_config: Path = _src["from_config"],
    preset: str = _src["preset"],
    position_limit: int = typer.Option(None, "--position-limit", help="where to project the precision (default 131072)"),
    json_out: Path = typer.Option(None, "--json", help="also write the report as JSON to this file (docs/schemas/doctor.json)"),
    junit_out: Path = typer.Option(None, "--junit", help="also write the report as JUnit XML (a testcase per site, a failure per "
                                   "fault) for CI systems (docs/ci.md)"),
    markdown: Path = typer.Option(None, "--markdown", help="also write the report as Markdown to this file"),
    fail_on: bool = typer.Option(False, "--fail-on", help="exit 1 when any fault is found"),
) -> None:
    """Find every positional-encoding site of MODEL and report its parameters and faults, with numbers.
    Rope options (--base 500000 …) may be given like build's."""
    from posexport.reports.surgery import doctor_junit
    from posexport.surgery import doctor

    for path, option in ((json_out, "--json"), (junit_out, "--junit"), (markdown, "--markdown")):
        if path:
            check_destination(path, option)
    report = doctor(model, requested(ctx, from_model, from_config, preset), position_limit, from_model)
    exporter = report["exporter"]
    console.print(escape(f"written by {exporter['name']}{' ' + exporter['version'] if exporter['version'] else ''} "
                         f"({'; '.join(exporter['evidence'])})"))
    for table in site_tables(report):
        console.print(table)
    for fault in report["exporter_faults"] or []:
        known = "known of this exporter" if fault["this_exporter"] else f"known of {', '.join(fault['known_of'])}"
        console.print(escape(f"exporter fault {fault['fault']} ({known}): {fault['detail']}"))
    metadata = report.get("export_metadata")
    if metadata is not None:
        console.print(escape(f"transformers' export metadata ({metadata['from']}): {json.dumps(metadata['says'])}"))
    for fault in (metadata or {}).get("faults", []):
        console.print(escape(f"export metadata fault {fault['fault']}: {fault['detail']}"))
    for note in report.get("notes", []):
        console.print(escape(note))
    if "genai_context_length" in report:
        console.print(f"genai_config.json context_length: {report['genai_context_length']}")
    console.print(escape(doctor_summary(report, fail_on)))
    write_reports(report, json_out, markdown, doctor_markdown, [(junit_out, lambda: doctor_junit(report), "--junit")])
    if fail_on and report["faults"]:
        raise typer.Exit(1)


def doctor_summary(report: dict[str, Any], fail_on: bool) -> str:
    """The doctor's last line: its verdict under --fail-on, the faults and sites counted, and for each rope it could
    not name, what to pass."""
    from posexport.reports.terminal import plural

    verdict = ("FAIL: " if report["faults"] else "PASS: ") if fail_on else ""  # what --fail-on's exit says
    line = f"{verdict}{plural(report['faults'], 'fault')} in {plural(len(report['sites']), 'site')}"
    for site in report.get("unrecognised", []):
        line += f"; site {site['site']}'s rope is not recognised: to check it against the model's and patch it, {site['what_to_pass']}"
    return line


def patch_command(
    ctx: typer.Context,
    model: Path = typer.Argument(..., help="the .onnx model to patch"),
    out: Path = typer.Option(..., "--out", "-o", help="the patched model (external data goes beside it)"),
    from_model: Path = _src["from_model"],
    from_config: Path = _src["from_config"],
    preset: str = _src["preset"],
    position_limit: int = _src["position_limit"],
    extend_learned: int = typer.Option(None, "--extend-learned", help="grow every learned position table to N positions"),
    strategy: str = typer.Option(None, "--strategy", help="how --extend-learned makes new rows: mean (positions below the old "
                                 "limit unchanged) or interpolate (every row resampled); default mean"),
    replace_mismatched: bool = typer.Option(False, "--replace-mismatched", help="rebuild a site whose parameters disagree "
                                            "with the source's (e.g. a config an exporter misread) to the source's rope"),
    json_out: Path = typer.Option(None, "--json", help="also write what was patched as JSON to this file (docs/schemas/patch.json)"),
) -> None:
    """Replace every positional-encoding site of MODEL by posexport's exact maths; nothing else changes.
    Without a parameter source the sites' own recovered parameters are used (shown below)."""
    from posexport.surgery import Extension, patch_file

    if strategy is not None and extend_learned is None:
        raise PosexportError(f"--strategy {strategy}: only with --extend-learned N")
    if json_out:
        check_destination(json_out, "--json")
    extension = Extension(extend_learned, strategy or "mean") if extend_learned is not None else None
    done = patch_file(model, out, requested(ctx, from_model, from_config, preset), position_limit, extension, replace_mismatched)
    for note in done.notes:
        console.print(escape(note))
    for entry in done.describe():
        params = {k: v for k, v in entry["params"].items() if v not in (None, [], ())}
        used = f" with {escape(json.dumps(params))}" if params else " (from the graph's own values)"
        console.print(f"patched {escape(entry['site'])} ({entry['kind']}){used}")
        if "how" in entry:
            console.print(escape(f"  {entry['how']}: it held {json.dumps(entry['old'])}"))
    console.print("wrote " + ", ".join(str(f) for f in done.files))
    if json_out:
        write_outputs([(json_out, json.dumps(done.report(), indent=2, sort_keys=True) + "\n", "--json")])


def model_parity_command(
    model: Path = typer.Option(..., "--model", help="the model under test (e.g. the patched one)"),
    against: Path = typer.Option(None, "--against", help="the reference ONNX model (e.g. the original), run on the same runtime"),
    against_hf: Path = typer.Option(None, "--against-hf", help="a transformers model folder, run in float64 as the oracle"),
    original: Path = typer.Option(None, "--original", help="the model before the patch: its error and failures are shown beside the model's"),
    prompt: list[int] = typer.Option([16], "--prompt", min=1, help="prompt lengths to run from position 0 (repeatable)"),
    past: list[int] = typer.Option([], "--past", min=0, help="decode one token after this many cached positions (repeatable)"),
    runtimes: str = typer.Option(",".join(DEFAULT_RUNTIMES), help="comma-separated runtimes (ort-cpu, ort-cpu-noopt, ort-cuda, openvino, reference, "
                                 "ort-web-wasm, ort-webgpu)"),
    browser: Path = typer.Option(None, "--browser", help=BROWSER_HELP),
    outputs: str = typer.Option("", "--outputs", help="comma-separated outputs or glob patterns to compare (default: every output; e.g. logits,present.*)"),
    tolerance: float = typer.Option(None, help="largest normalised error max|out − ref| / max(1, max|ref|) that passes (default: "
                                    f"{TOLERANCE:g} for a float32 model; {ROUNDOFF_UNITS}·u·√(past + seq) for a float16 or bfloat16 "
                                    "one, u its unit roundoff), or --floor-factor times the floor where that is larger"),
    floor_factor: float = typer.Option(FLOOR_FACTOR, "--floor-factor", help="against transformers, an output also passes within "
                                       "this many times the error of transformers' own float32 forward on the same feeds (0: no floor)"),
    text: Path = typer.Option(None, "--text", help="prompts cut from this text, tokenized by the tokenizer.json of --against-hf DIR "
                              "(else of the model's folder); default: Python's standard-library docstrings where a tokenizer is found"),
    tokens: Path = typer.Option(None, "--tokens", help="prompts cut from these token ids (.npy, or a JSON list)"),
    random_ids: bool = typer.Option(False, "--random-ids", help="seeded random token ids instead of text"),
    generate: int = typer.Option(0, "--generate", help="also decode N tokens greedily after each prompt through the model's own "
                                 "KV cache, against transformers (with --against-hf)"),
    dim: list[str] = typer.Option([], "--dim", help="size of a symbolic input dimension, NAME=N (repeatable)"),
    seed: int = typer.Option(0, min=0, help="seed of the generated feeds"),
    timeout: float = typer.Option(DEFAULT_TIMEOUT, "--timeout", help="seconds each load and each case may take on a runtime; "
                                  "past them the runtime's process is killed and the case fails, saying so"),
    details: bool = typer.Option(False, "--details", help="list every case and output, not only the failing ones"),
    json_out: Path = typer.Option(None, "--json", help="also write the report as JSON to this file"),
    junit_out: Path = typer.Option(None, "--junit", help="also write the report as JUnit XML to this file"),
    markdown: Path = typer.Option(None, "--markdown", help="also write the report as Markdown to this file"),
    strict: bool = typer.Option(False, help="also fail on an output not compared or an unavailable runtime"),
) -> None:
    """Whole-model parity: feeds from MODEL's signature (prompts cut from real text where a tokenizer is found),
    the same on every runtime, every output the reference can produce compared with it (logits, and each
    layer's key/value cache against transformers), with next-token agreement. Exits 1 when the model fails or
    drifts past its bound."""
    from posexport.reports import parity as reports
    from posexport.verdicts.runners import get_runtimes
    from posexport.verdicts import FeedCase, model_parity

    from .parity import report_files

    check_inputs({"--model": model, "--against": against, "--original": original, "--text": text, "--tokens": tokens}, against_hf)
    written = report_files(json_out, junit_out, markdown)
    cases = [FeedCase(n) for n in prompt] + [FeedCase(1, n) for n in past]
    report = model_parity(model, against, against_hf=against_hf, cases=cases,
                          runtimes=get_runtimes([r for r in runtimes.split(",") if r], browser),
                          tolerance=tolerance, seed=seed, dims=parse_dims(dim), outputs=[o for o in outputs.split(",") if o] or None,
                          original=original, text=text, tokens=tokens, random_ids=random_ids, generate=generate,
                          floor_factor=floor_factor, timeout=timeout)
    reports.render_terminal(report, console, details=details, strict=strict)
    write_outputs([(path, render(report), option) for path, render, option in written])
    raise typer.Exit(0 if (report.strictly_passed() if strict else report.passed) else 1)


def check_inputs(paths: dict[str, Path | None], against_hf: Path | None) -> None:
    """Every file given exists, and --against-hf is a transformers model folder with transformers installed;
    each is an input of the command, that no report may be written over."""
    for option, path in paths.items():
        if path is not None and not (path.exists() or path.is_symlink()):
            raise PosexportError(f"{option} {path}: no such file")
        if path is not None:
            note_input(path)
    if against_hf is not None:
        if not (against_hf / "config.json").is_file():
            raise PosexportError(f"--against-hf {against_hf}: not a transformers model folder (no config.json)")
        require("transformers", "--against-hf", "hf")
        for entry in sorted(against_hf.iterdir())[:10_000]:  # transformers reads them itself: reports never go there
            note_input(entry)


def parse_dims(items: list[str]) -> dict[str, int]:
    sizes = {}
    for item in items:
        name, _, value = item.partition("=")
        if not value.isdigit():
            raise PosexportError(f"--dim {item}: expected NAME=N")
        sizes[name.lower()] = int(value)
    return sizes


def write_reports(report: dict[str, Any], json_out: Path | None, markdown: Path | None,
                  render: Callable[[dict[str, Any]], str],
                  others: Sequence[tuple[Path | None, Callable[[], str], str]] = ()) -> None:
    """The report as JSON and/or Markdown files (and ``others``: (path, text, option)), as asked, all checked first."""
    write_outputs([(path, text(), option) for path, text, option in (
        (json_out, lambda: json.dumps(report, indent=2, sort_keys=True) + "\n", "--json"),
        (markdown, lambda: render(report), "--markdown"), *others) if path])


def register(app: typer.Typer) -> None:
    app.command("doctor", cls=ExtraOptions, context_settings=EXTRA_OPTIONS)(doctor_command)
    app.command("patch", cls=ExtraOptions, context_settings=EXTRA_OPTIONS)(patch_command)
    app.command("model-parity")(model_parity_command)
