"""The shell commands of README.md and docs/*.md run as written and exit as documented.

Every line of a ```sh or ```bash block is a command: `posexport ...` runs in this process (the CLI's main,
as a user's shell would call it), `make TARGET` runs the target's posexport lines from the Makefile or is
skipped for the reason MAKE gives. Each doc's commands run in order in one temporary folder, as a user would
type them: what a command writes is what the next one reads, and no command replaces a file an earlier one
wrote with other contents (a tour that overwrote its own graph would check another one than it names) unless
its comment says `replaces`. The models a doc names are tiny random ones made under those names (MODELS; a
doc's own in DOC_MODELS: the README's model.onnx is the torch.onnx export of its own Llama-3.1-style model).
A command exits 0 unless its comment says `exits N`. A line that is neither fails here, so a doc cannot gain
a command no test runs.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import zoo
from zoo import exporters as ef

from . import learned_fixtures as lf
from . import surgery_fixtures as sf
from . import trained_fixtures as tf
from . import test_surgery_generation as generation
from .test_parity_cli import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(sh|bash|yaml)\n(.*?)^```", re.S | re.M)
RUN_STEP = re.compile(r"^\s*(?:-\s*)?run:\s*(\S.*)$")  # a CI workflow's one-line step (docs/ci.md)
EXITS = re.compile(r"\bexits (\d+)\b")
REPLACES = re.compile(r"\breplaces\b")

# make targets: None runs the target's posexport lines; a string is why the target is not run here.
MAKE: dict[str, str | None] = {
    "run": None,
    "test": "the whole suite, which this test is part of",
    "test-all": "the whole suite with every member of the registry walks, which this test is part of",
    "lock": "rewrites locks/ from the package index's newest releases: run by hand to plan a lock bump (docs/environments.md)",
    "upstream": "installs the newest releases into scratch venvs and runs the catalogue walk, exporters and docs there: "
                "many minutes, never part of CI (docs/environments.md)",
    "bench": "rewrites the recorded benchmarks/ files: minutes of timing, run by hand (docs/benchmarks.md)",
    "bench-gpu": "needs an NVIDIA GPU and onnxruntime-gpu",
    "matrix": "every architecture × every exporter, each exporter in its own venv: ten minutes and more on 2 cores; the suite runs "
              "one fixture per pattern (tests/test_surgery_exporters.py, tests/test_matrix_page.py)",
    "bench-size": "writes 0.5-4 GiB models (12 GiB of disk at its peak) and times them: run by hand; tests/test_surgery_size.py "
                  "checks a 300 MB one",
    "bench-t5-patch": "rewrites benchmarks/t5-patch-ort-cpu.*: minutes of timing, run by hand",
    "web-runtime": "npm ci of onnxruntime-web into the package's folder: make test runs it before the suite",
    "web-conformance": "rewrites docs/runtimes.md's onnxruntime-web table: minutes in a browser; the suite runs one entry per "
                       "browser runtime (tests/test_conformance.py) and tests/test_runtimes_web.py",
    "bench-parity-memory": "rewrites benchmarks/parity-memory.*: gigabytes of logits, run by hand; tests/test_verdicts_memory.py "
                           "checks one size",
    "trained": "every exporter on two trained models: minutes of exports, run by hand; tests/test_verdicts_trained.py runs one "
               "export per pattern",
}

# Commands (by their first words) not run here, and why.
NOT_RUN = {
    "pip": "installs into the environment; scripts/wheel-smoke.sh installs the wheel so, in a fresh venv, in CI",
    "posexport bench": "a timing run at the default 32 heads × 128 channels, 20 s to minutes of CPU as written; "
                       "tests/test_bench.py runs the command on small shapes",
}


@dataclass(frozen=True)
class Command:
    doc: Path
    line: str  # as written, without its comment
    args: tuple[str, ...]
    exit: int
    replaces: bool = False  # its comment says it replaces a file an earlier command wrote

    @property
    def id(self) -> str:
        return f"{self.doc.name}: {self.line}"


def commands_of(doc: Path) -> list[Command]:
    """Every command of the doc's shell blocks, and every `run:` step of its workflow (YAML) blocks, in order."""
    found = []
    for kind, block in FENCE.findall(doc.read_text()):
        lines = block.replace("\\\n", " ").splitlines()
        if kind == "yaml":
            lines = [step[1] for step in map(RUN_STEP.match, lines) if step]
        for raw in lines:
            line, _, comment = raw.partition(" #")
            if line.strip() and not line.lstrip().startswith("#"):
                exits = EXITS.search(comment)
                found.append(Command(doc, line.strip(), tuple(shlex.split(line)), int(exits[1]) if exits else 0,
                                     bool(REPLACES.search(comment))))
    return found


def make_target(target: str) -> list[tuple[str, ...]]:
    """The posexport lines of a Makefile target's recipe, as argument lists."""
    recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe, f"make {target}: no such target in the Makefile"
    lines = [line.strip() for line in recipe[1].splitlines()]
    return [tuple(shlex.split(line))[1:] for line in lines if line.startswith("$(VENV)/bin/posexport ")]


# --- the models the docs name, made tiny under the same names ----------------------------------------


def llama31(folder: Path) -> None:
    zoo.saved_config(folder, "LlamaConfig", **zoo.SMALL, num_key_value_heads=2, max_position_embeddings=131072,
                           rope_theta=500000.0, rope_scaling=dict(zoo.LLAMA3))


def t5(folder: Path) -> None:
    zoo.saved_model(folder, "T5Config", "T5Model", vocab_size=64, d_model=32, d_kv=8, d_ff=32, num_layers=2,
                          num_heads=4, relative_attention_num_buckets=16, relative_attention_max_distance=32)


def vit(folder: Path) -> None:
    zoo.saved_model(folder, "ViTConfig", "ViTModel", hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=32, image_size=32, patch_size=8)


def llama3_config(path: Path) -> None:
    zoo.raw(path.parent, {"model_type": "llama", **zoo.SMALL, "max_position_embeddings": 131072,
                          "rope_theta": 500000.0, "rope_scaling": dict(zoo.LLAMA3)})


def copied(made: Callable[[], Path], folder: bool = False) -> Callable[[Path], None]:
    """A copy of a session-cached surgery fixture: a folder, a model with its external data, or (``folder``)
    the folder a model path names (an onnxruntime-genai export)."""
    def copy(dest: Path) -> None:
        src = made()
        if src.is_dir():
            shutil.copytree(src, dest.parent if folder else dest)
            return
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        for data in src.parent.glob(src.name + ".data"):
            shutil.copyfile(data, dest.parent / data.name)
    return copy


def genai_llama3() -> Path:
    return sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)


def dynamic_llama() -> Path:
    return sf.tiny_llama("torch-dynamic", "dynamic")


# path as the docs write it (without ./ or a trailing /) -> how to make a tiny stand-in there
MODELS: dict[str, Callable[[Path], None]] = {
    # the README's own model: Llama-3.1's rope, with weights (its tour exports it, patches the export from it)
    "Meta-Llama-3.1-8B": copied(sf.tiny_llama31),
    "Meta-Llama-3.1-8B-Instruct": llama31,
    "t5-small": t5,
    "flan-t5-base": t5,
    "vit-base-patch16-224": vit,
    "my-model/config.json": llama3_config,
    "tiny-llama3": copied(genai_llama3),
    "gen/model.onnx": copied(lambda: sf.genai_export(genai_llama3()).parent, folder=True),
    "model.onnx": copied(lambda: sf.torch_export(sf.tiny_llama("torch-default", "default"))),
    "tiny-llama-dynamic": copied(dynamic_llama),
    "dyn-as-plain.onnx": copied(lambda: sf.torch_export(sf.as_plain(dynamic_llama()))),
    "gpt2.onnx": copied(lambda: lf.export("gpt2")),
    "whisper-decoder.onnx": copied(lf.whisper_decoder),
    "t5-encoder.onnx": copied(sf.t5_encoder_export),
    "tiny-llama": copied(generation.folder),
    "llama-gen/prefill.onnx": copied(lambda: generation.components("cpu"), folder=True),
    "llama-gen/decode.onnx": copied(lambda: generation.components("cpu"), folder=True),
    # a trained model stands in for SmolLM2 (tied embeddings, a real tokenizer), judged on a text it did not learn
    "SmolLM2-135M": copied(lambda: tf.trained("llama")),
    "smollm2-genai/model.onnx": copied(lambda: tf.export("llama", "genai-fp32").parent, folder=True),
    "base-off.onnx": copied(lambda: sf.torch_export_with_cache(tf.variant("llama", "base-off", rope_theta=10100.0))),
    "LICENSE": copied(lambda: tf.TEXT),
    # docs/recipes.md: the trained model stands in for Qwen2.5-Coder-7B (its genai export of 256 rows for the 32k one)
    "Qwen2.5-Coder-7B": copied(lambda: tf.trained("llama")),
    "Qwen2.5-Coder-7B-yarn": copied(lambda: tf.variant("llama", "yarn-131072", 131072, rope_type="yarn", factor=4.0,
                                                       original_max_position_embeddings=32768)),
    "qwen-genai/model.onnx": copied(lambda: tf.export("llama", "genai-fp32").parent, folder=True),
    "base100k": copied(lambda: tf.variant("llama", "base100k", rope_theta=100000.0)),
    "optimum-out/model.onnx": copied(lambda: tf.export("llama", "optimum", tf.variant("llama", "base100k", rope_theta=100000.0)).parent,
                                     folder=True),
}
# A doc's own stand-ins, where it means another model than the other docs under the same name.
TOUR_EXPORT = copied(lambda: sf.torch_export(sf.tiny_llama31()))
DOC_MODELS: dict[str, dict[str, Callable[[Path], None]]] = {
    # the README tour's exported model, and the CI gate's: torch.onnx of the README's own Llama-3.1-style model
    "README.md": {"model.onnx": TOUR_EXPORT},
    "ci.md": {"model.onnx": TOUR_EXPORT},
}
NEEDS_GENAI = {"tiny-llama3", "gen/model.onnx", "smollm2-genai/model.onnx", "qwen-genai/model.onnx"}


def stand_ins(args: tuple[str, ...], folder: Path, doc: Path) -> None:
    models = MODELS | DOC_MODELS.get(doc.name, {})
    for arg in args:
        name = arg.removeprefix("./").rstrip("/")
        if name in models and not (folder / name).exists():
            if name in NEEDS_GENAI:
                pytest.importorskip("onnxruntime_genai", reason="the docs' genai model is made by onnxruntime-genai's builder")
            try:
                models[name](folder / name)
            except ef.ExporterMissing as e:
                pytest.skip(f"the docs' {name} is made by an exporter not installed here: {e}")


def not_run_because(command: Command) -> str | None:
    for words in (" ".join(command.args[:2]), command.args[0]):
        if words in NOT_RUN:
            return NOT_RUN[words]
    if command.args[0] == "make":
        return MAKE.get(command.args[1], "a make target this test does not know: add it to MAKE, with why")
    return None


# --- running them ---------------------------------------------------------------------------------------

COMMANDS = [c for doc in DOCS for c in commands_of(doc)]
RAN: dict[Path, tuple[Path, int]] = {}  # doc -> its folder, and how many of its commands have run there


def run(command: Command, folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[str, ...], int, str]]:
    """(args, exit, output) of each posexport call the command makes."""
    if command.args[0] == "make":
        calls = make_target(command.args[1])
    elif command.args[0] == "posexport":
        calls = [command.args[1:]]
    else:
        raise AssertionError(f"{command.id}: not a posexport or make command; run it here or take it out of the docs")
    monkeypatch.chdir(folder)
    done = []
    for args in calls:
        stand_ins(args, folder, command.doc)
        before = contents(folder)
        code, out, err = cli(*args)
        replaced = sorted(str(p.relative_to(folder)) for p, digest in contents(folder).items() if before.get(p, digest) != digest)
        assert command.replaces or not replaced, (f"{command.id}: replaces {', '.join(replaced)}, which an earlier command wrote, "
                                                  "with other contents (say `replaces` in its comment if the doc means it)")
        done.append((args, code, out + err))
    return done


def contents(folder: Path) -> dict[Path, str]:
    """Every file under ``folder`` and its sha256."""
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_documented_command_exits_as_documented(command, tmp_path_factory, monkeypatch):
    if why := not_run_because(command):
        assert command.args[0] != "make" or command.args[1] in MAKE, f"{command.id}: {why}"
        pytest.skip(f"{command.line}: {why}")
    folder, done = RAN.get(command.doc) or (tmp_path_factory.mktemp(command.doc.stem), 0)
    mine = COMMANDS.index(command)
    before = [c for c in COMMANDS[:mine] if c.doc == command.doc]
    for earlier in before[done:]:  # what the doc ran before this line (run alone with -k, too)
        if not not_run_because(earlier):
            run(earlier, folder, monkeypatch)
    RAN[command.doc] = (folder, len(before) + 1)
    for args, code, output in run(command, folder, monkeypatch):
        tail = "\n".join(output.strip().splitlines()[-15:])
        assert code == command.exit, f"posexport {shlex.join(args)} exited {code}, the docs say {command.exit}:\n{tail}"


def test_the_docs_have_commands_and_each_program_is_known():
    assert len(COMMANDS) > 20
    assert {c.args[1] for c in COMMANDS if c.args[0] == "make"} <= set(MAKE)
    assert {c.args[0] for c in COMMANDS} <= {"posexport", "make", *(words.split()[0] for words in NOT_RUN)}
