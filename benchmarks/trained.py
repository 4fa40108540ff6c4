"""The verdicts on trained models, every exporter, as a user runs them: the suite's trained Llama (tied
embeddings) and Gemma-3 (a sliding layer), tests/trained_fixtures.py, exported by each exporter, then

    posexport patch MODEL --out FIXED --from-model DIR --position-limit 4096
    posexport doctor FIXED --from-model DIR --fail-on
    posexport model-parity --model FIXED --against-hf DIR --text LICENSE --prompt 2000 --generate 64
    posexport model-parity --model FIXED --against-hf DIR --random-ids --prompt 2000

and, both ways, the same model exported from a config whose rope base is 1% off, judged against the right
one on the text and on random ids (it must exit 1). Each command runs in this process as the CLI's main;
its exit code and last line are recorded. Writes benchmarks/trained.{json,md} (`make trained`).

    .venv/bin/python benchmarks/trained.py --json benchmarks/trained.json --markdown benchmarks/trained.md
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("posexport", "onnx", "onnxruntime", "onnxruntime-genai", "onnxscript", "torch", "transformers", "tokenizers", "numpy")  # the Versions line
sys.path.insert(0, str(ROOT))

from zoo import exporters as ef  # noqa: E402
from tests import trained_fixtures as tf  # noqa: E402

EXPORTERS = {
    "llama": ("torch-dynamo", "transformers-onnx", "transformers-onnx-ort-cpu", "genai-fp32", "genai-int4", "optimum", "mobius"),
    "gemma3": ("torch-dynamo", "transformers-onnx", "transformers-onnx-ort-cpu", "genai-fp32", "optimum", "mobius"),
}
WRONG_BASE = ("torch-dynamo", "genai-fp32")  # exported from the config 1% off, judged against the right one
POSITION_LIMIT = 4096


def posexport(*args: str | Path) -> tuple[int, str]:
    """`posexport ARGS` in this process: its exit code and its output's last line (the verdict)."""
    from posexport_cli.main import main

    out = io.StringIO()
    argv, sys.argv = sys.argv, ["posexport", *map(str, args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    return code, " ".join(lines[-1].split()).replace(f"{tf.ROOT}/", "") if lines else ""  # no scratch paths: pages compare


def parity(fixed: Path, folder: Path, prompt: int, generate: int, inputs: list[str], work: Path, name: str) -> dict[str, object]:
    """model-parity of one model: its exit code, verdict, and from its JSON the worst error over its floor,
    next-token agreement and the greedy decode."""
    report_path = work / f"{name}.json"
    extra = ["--generate", str(generate)] if generate else []
    code, last = posexport("model-parity", "--model", fixed, "--against-hf", folder, *inputs, "--prompt", str(prompt),
                           "--runtimes", "ort-cpu", "--json", report_path, *extra)
    row: dict[str, object] = {"exit": code, "verdict": last}
    if report_path.is_file():
        report = json.loads(report_path.read_text())
        measured = [r for r in report["results"] if r["comparison"]]
        worst = max(measured, key=lambda r: r["comparison"]["normalised"], default=None)
        if worst is not None:
            row["worst"] = f"{worst['output']} {worst['comparison']['normalised']:.2e} (floor {worst['floor']:.2e})" if worst["floor"] \
                else f"{worst['output']} {worst['comparison']['normalised']:.2e}"
        tokens = [r["tokens"] for r in report["results"] if r.get("tokens")]
        if tokens:
            row["tokens"] = f"{tokens[0]['agreed']}/{tokens[0]['positions']}"
        gens = report.get("generations", [])
        if gens:
            g = gens[0]
            row["generate"] = f"{g['agreed']}/{g['steps']}" + (f", diverges at step {g['first_divergence']}" if g["first_divergence"] is not None
                                                             else "") + f", gap {g['largest_gap']:.1e}"
        row["not_compared"] = len(report["not_compared"])
    return row


def one(arch: str, exporter: str, prompt: int, generate: int, work: Path) -> dict[str, object]:
    folder = tf.trained(arch)
    row: dict[str, object] = {"model": arch, "exporter": exporter}
    start = time.monotonic()
    try:
        model = tf.export(arch, exporter)
    except (ef.ExporterMissing, RuntimeError) as e:  # the exporter's own last words
        last = [line.strip() for line in str(e).splitlines() if line.strip()][-1:] or [type(e).__name__]
        return row | {"exported": False, "reason": last[0][:240].replace(f"{tf.ROOT}/", "")}
    fixed = work / f"{arch}--{exporter}" / "model.onnx"
    code, last = posexport("patch", model, "--out", fixed, "--from-model", folder, "--position-limit", POSITION_LIMIT)
    row |= {"exported": True, "patch": code, "patch_line": last}
    if code != 0:
        return row
    row["doctor"] = posexport("doctor", fixed, "--from-model", folder, "--fail-on")
    row["text"] = parity(fixed, folder, prompt, generate, ["--text", tf.TEXT], work, f"{arch}--{exporter}--text")
    row["random"] = parity(fixed, folder, prompt, 0, ["--random-ids"], work, f"{arch}--{exporter}--random")
    if arch == "llama" and exporter in WRONG_BASE:
        wrong = tf.export(arch, exporter, tf.variant(arch, "base-off", rope_theta=10100.0))
        row["base_off_text"] = parity(wrong, folder, 256, 0, ["--text", tf.TEXT], work, f"{arch}--{exporter}--off-text")
        row["base_off_random"] = parity(wrong, folder, 256, 0, ["--random-ids"], work, f"{arch}--{exporter}--off-random")
    row["seconds"] = round(time.monotonic() - start, 1)
    print(f"{arch} {exporter}: {row['text']['verdict'] if 'text' in row else row.get('reason')}", file=sys.stderr)
    return row


def cell(value: object) -> str:
    return str(value).replace("|", "\\|")


def versions() -> str:
    """The packages the page depends on, at the versions installed (benchmarks/README.md: the lock's)."""
    import importlib.metadata

    return ", ".join(f"{name} {importlib.metadata.version(name)}" for name in PACKAGES)


def markdown(report: dict[str, object]) -> str:
    lines = [
        "# Verdicts on trained models, every exporter", "",
        f"Command: `{report['command']}`  ", f"Machine: {report['machine']}  ", f"Versions: {report['versions']}", "",
        "The suite's trained models (tests/trained_fixtures.py: hidden 64, 2 layers, a 512-id byte-level BPE, trained on "
        "Python's docstrings; the Llama ties its embeddings, the Gemma-3 has a sliding layer of window 16 before a full "
        f"one), exported by each exporter, patched with `--position-limit {POSITION_LIMIT}`, then `doctor --fail-on` and "
        f"`model-parity --against-hf DIR --prompt {report['prompt']}` on the LICENSE (which they were not trained on, "
        f"tokenized by their own tokenizer) with `--generate {report['generate']}`, and on random ids. *base 1% off*: "
        "the same weights exported from a config with rope_theta 10100, judged against the right model at 256 tokens "
        "(exit 1 is the right answer). Exit codes: 0 pass, 1 fail.", "",
        "| model | exporter | doctor after patch | text: exit | worst output (floor) | next token | greedy | random ids: exit | base 1% off: text, random ids | reason |",
        "|---|---|---|---:|---|---|---|---:|---|---|",
    ]
    for r in report["rows"]:
        if not r.get("exported"):
            lines.append(f"| {r['model']} | {r['exporter']} | — | — | — | — | — | — | — | export failed: {cell(r.get('reason', ''))} |")
            continue
        if r.get("patch") != 0:
            lines.append(f"| {r['model']} | {r['exporter']} | — | — | — | — | — | — | — | patch refused: {cell(r['patch_line'])} |")
            continue
        text, random = r["text"], r["random"]
        off = (f"{r['base_off_text']['exit']}, {r['base_off_random']['exit']}" if "base_off_text" in r else "")
        reason = "" if text["exit"] == 0 else cell(text["verdict"])
        lines.append(f"| {r['model']} | {r['exporter']} | exit {r['doctor'][0]}: {cell(r['doctor'][1])} | {text['exit']} | "
                     f"{cell(text.get('worst', ''))} | {text.get('tokens', '')} | {cell(text.get('generate', ''))} | {random['exit']} | "
                     f"{off} | {reason} |")
    lines += ["", "Rows that fail are the right answers: an int4 export is not the float32 model (its quantized weights are "
              "far past any float32 bound against float64 transformers; shown for its vocabulary, read through its MatMulNBits "
              "head, and its tokens), and mobius-onnx's Gemma-3 graph is wrong upstream of any rope site "
              "(docs/compatibility.md: EXPORT WRONG). onnxruntime-genai's builder cannot read transformers 5's per-layer "
              "rope_parameters of Gemma-3."]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=2000)
    parser.add_argument("--generate", type=int, default=64)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--markdown", type=Path, required=True)
    args = parser.parse_args(argv)
    work = tf.ROOT / "work"
    work.mkdir()
    rows = [one(arch, exporter, args.prompt, args.generate, work) for arch, exporters in EXPORTERS.items() for exporter in exporters]
    report = {"command": "python benchmarks/trained.py " + " ".join(argv), "prompt": args.prompt, "generate": args.generate,
              "versions": versions(),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}", "rows": rows}
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    args.markdown.write_text(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
