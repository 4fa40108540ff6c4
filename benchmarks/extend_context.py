"""Context extension, measured as a user runs it (docs/recipes.md): the suite's trained Llama (tests/trained_fixtures.py)
with a config promising 4096 positions, exported by onnxruntime-genai's builder (caches of 4096 rows, context_length
4096), extended to 16384 positions with YaRN (factor 4 over the 4096) by one command,

    posexport patch gen/model.onnx --out gen-16k/model.onnx --from-model DIR --position-limit 16384 \\
        --scaling yarn --factor 4 --original-max-positions 4096

then onnxruntime-genai's generator on a prompt past 4096 tokens (16 greedy tokens, against transformers configured
with the same YaRN; the original folder refuses the prompt), doctor --fail-on, and model-parity at 12000 tokens
against float64 transformers with the same YaRN, and against transformers without it (which must fail). Writes
benchmarks/extend-context.{json,md} (`make extend-context`).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.trained import posexport, versions  # noqa: E402
from tests import trained_fixtures as tf  # noqa: E402

OLD, NEW, FACTOR = 4096, 16384, 4


def generate(folder: Path, prompt: list[int], steps: int) -> list[int] | str:
    """onnxruntime-genai's greedy tokens after the prompt, or its error."""
    try:
        return tf.genai_greedy(folder, prompt, steps)
    except Exception as e:  # the runtime's own refusal is the measurement
        return f"error: {e}"


def parity(model: Path, folder: Path, prompt: int, work: Path, name: str) -> dict[str, object]:
    report = work / f"{name}.json"
    start = time.perf_counter()
    code, last = posexport("model-parity", "--model", model, "--against-hf", folder, "--prompt", str(prompt),
                           "--runtimes", "ort-cpu", "--json", report)
    row: dict[str, object] = {"exit": code, "verdict": last, "seconds": round(time.perf_counter() - start, 1)}
    if report.is_file():
        results = json.loads(report.read_text())["results"]
        row["errors"] = {r["output"]: r["comparison"]["normalised"] for r in results if r["comparison"]}
        row["tokens"] = next((f"{r['tokens']['agreed']}/{r['tokens']['positions']}" for r in results if r.get("tokens")), None)
    return row


def measure(prompt_tokens: int, parity_tokens: int) -> dict[str, object]:
    trained = tf.variant("llama", f"promising-{OLD}", OLD)
    yarn = tf.variant("llama", f"yarn-{NEW}", NEW, rope_type="yarn", factor=float(FACTOR), original_max_position_embeddings=OLD)
    model = tf.export("llama", "genai-fp32", trained)
    fixed = tf.ROOT / "extended" / "model.onnx"
    patch = posexport("patch", model, "--out", fixed, "--from-model", trained, "--position-limit", str(NEW), "--scaling", "yarn",
                      "--factor", str(FACTOR), "--original-max-positions", str(OLD))
    config = json.loads((fixed.parent / "genai_config.json").read_text())
    ids = tf.tokenizer().encode(tf.TEXT.read_text()).ids[:prompt_tokens]
    ours, theirs = generate(fixed.parent, ids, 16), tf.greedy(yarn, ids, 16)
    return {
        "patch": {"exit": patch[0], "context_length": config["model"]["context_length"], "max_length": config["search"]["max_length"]},
        "generator": {"prompt": len(ids), "original": generate(model.parent, ids, 16), "extended": ours, "transformers": theirs,
                      "agree": sum(a == b for a, b in zip(ours, theirs)) if isinstance(ours, list) else 0},
        "doctor": posexport("doctor", fixed, "--from-model", yarn, "--fail-on"),
        "parity": parity(fixed, yarn, parity_tokens, fixed.parent, "yarn"),
        "parity_without_yarn": parity(fixed, trained, parity_tokens, fixed.parent, "plain"),
    }


def markdown(found: dict[str, object], command: str) -> str:
    g, p, q = found["generator"], found["parity"], found["parity_without_yarn"]
    worst = max(p.get("errors", {}).items(), key=lambda kv: kv[1], default=("—", float("nan")))
    plain = min((v for k, v in q.get("errors", {}).items() if k.endswith("key")), default=float("nan"))
    return "\n".join([
        f"# Context extension: {OLD} → {NEW} positions with YaRN", "",
        f"Command: `{command}`  ", f"Machine: {platform.machine()}, Python {platform.python_version()}  ", f"Versions: {versions()}", "",
        f"The suite's trained Llama (hidden 64, 2 layers, a 512-id BPE) with a config promising {OLD} positions, exported by "
        f"onnxruntime-genai's builder, patched by one command to {NEW} positions with YaRN (factor {FACTOR} over {OLD}) "
        "(docs/recipes.md).", "",
        "| check | result |", "|---|---|",
        f"| patch | exit {found['patch']['exit']}; genai_config context_length {found['patch']['context_length']}, max_length "
        f"{found['patch']['max_length']} |",
        f"| generator, original folder, {g['prompt']}-token prompt | {g['original'] if isinstance(g['original'], str) else 'ran'} |",
        f"| generator, extended folder, {g['prompt']}-token prompt, 16 greedy tokens | {g['agree']}/16 agree with transformers "
        "(float32, the same YaRN) |",
        f"| doctor --fail-on, against the YaRN config | exit {found['doctor'][0]}: {found['doctor'][1]} |",
        f"| model-parity, {p.get('tokens', '—').split('/')[-1] if p.get('tokens') else '—'} tokens, against float64 transformers "
        f"with the same YaRN | exit {p['exit']}; worst {worst[0]} {worst[1]:.2e}; next token {p.get('tokens')}; {p['seconds']} s |",
        f"| the same, against transformers without the YaRN | exit {q['exit']} (must be 1); key caches {plain:.2e} off at least |", "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=4200, help="generator prompt (past the old limit)")
    parser.add_argument("--parity", type=int, default=12000, help="model-parity prompt")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--markdown", type=Path, required=True)
    args = parser.parse_args()
    found = measure(args.prompt, args.parity)
    command = "python benchmarks/extend_context.py " + " ".join(sys.argv[1:])
    args.json.write_text(json.dumps(found, indent=2) + "\n")
    args.markdown.write_text(markdown(found, command))


if __name__ == "__main__":
    main()
