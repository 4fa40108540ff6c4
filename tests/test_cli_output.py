"""What the command prints, wherever it prints it: tables whole in pipes and logs, progress only on a
terminal's stderr, --version/-h/--verbose/--quiet, exit codes that agree with the last line, --out folders
made, the parameters a patch used, and a missing optional dependency as one line before any work.
In-process (the CLI's main) except where a terminal or a fresh interpreter is the point."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from posexport import export

from . import surgery_fixtures as sf
from .conftest import artifact, posexport_cli
from .test_hardening_io import one_error
from .test_parity_cli import SMALL, cli

SKETCH = ["--seqs", "1,17", "--batches", "1"]


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> Path:
    path, _ = export.save(artifact("rope", head_dim=16, heads=2, max_positions=512), tmp_path_factory.mktemp("graph"), "rope")
    return path


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_version_and_short_help():
    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"posexport {importlib.metadata.version('posexport')}"
    for args in (["-h"], ["build", "-h"], ["doctor", "-h"]):
        code, out, err = cli(*args)
        assert code == 0 and "Usage" in out + err, args


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_and_quiet_before_or_after_the_command(tmp_path, where):
    build = ["build", "--encoding", "alibi", "--heads", "4", "--out", str(tmp_path)]
    for flag in ("--quiet", "-q", "--verbose"):
        code, out, err = cli(*([flag, *build] if where == "before" else [*build, flag]))
        assert code == 0, out + err
        if flag != "--verbose":  # only the last line: what was written
            assert out.splitlines() == [last_line(out)] and out.startswith(f"wrote {tmp_path / 'alibi.onnx'}")
    code, out, _ = cli(*build)
    assert len(out.strip().splitlines()) == 1  # build prints one line anyway: quiet keeps exactly that one
    code, out, _ = cli("list")
    code_q, out_q, _ = cli("list", "--quiet")
    assert code == code_q == 0 and len(out.splitlines()) > 5 and out_q.splitlines() == [last_line(out)]


def test_every_command_takes_verbose_and_quiet():
    from posexport_cli.main import COMMANDS

    for name in COMMANDS:
        code, out, err = cli(name, "--verbose", "--quiet", "-h")
        assert code == 0 and "--quiet" in out + err and "--verbose" in out + err, name


def test_strict_says_fail_and_why_and_exits_1(graph):
    from posexport.runtimes import get_runtime

    if get_runtime("ort-cuda").available()[0]:
        pytest.skip("ort-cuda is available here: --strict has nothing to refuse")
    args = ["parity", str(graph), "--runtimes", "ort-cpu,ort-cuda", *SKETCH]
    code, out, _ = cli(*args)
    assert code == 0 and last_line(out).startswith("PASS: ")
    code, out, _ = cli(*args, "--strict")
    line = last_line(out)
    assert code == 1 and line.startswith("FAIL (--strict)") and "--strict fails on 1 unavailable runtime," in line
    code, out, _ = cli("parity", str(graph), "--runtimes", "ort-cpu", *SKETCH, "--strict")
    assert code == 0 and last_line(out).startswith("PASS: ")


def test_tables_in_a_pipe_are_laid_out_whole(graph):
    """In a pipe (or a test's StringIO) rich would lay tables out at 80 columns and cut cells with "…"."""
    code, out, _ = cli("parity", str(graph), "--runtimes", "ort-cpu-noopt,reference", *SMALL, "--pairwise", "--details")
    assert code == 0
    assert "…" not in out and "ort-cpu-noopt vs reference" in out
    assert max(map(len, out.splitlines())) > 80  # laid out wider than rich's default, not wrapped into it
    # On an 80-column terminal the tables wrap text instead: still nothing cut, every runtime named whole.
    from posexport.options import parity_from_options
    from posexport.reports import parity as reports

    report = parity_from_options(graph, {}, runtimes=["ort-cpu-noopt", "reference"], seqs=[1, 17], batches=[1, 3], pairwise=True)
    narrow = Console(file=io.StringIO(), width=80)
    reports.render_terminal(report, narrow, details=True)
    shown = narrow.file.getvalue()
    assert "…" not in shown and "ort-cpu-noopt vs reference" in shown and max(map(len, shown.splitlines())) <= 80


def test_progress_goes_to_a_terminals_stderr_and_never_into_a_pipe(graph):
    """stdout a pipe, stderr a terminal: the bar is drawn on the terminal, stdout holds only the report."""
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"}
    exe = Path(sys.executable).with_name("posexport")
    proc = subprocess.Popen([str(exe), "parity", str(graph), "--runtimes", "ort-cpu,reference", *SMALL],
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    terminal = b""
    with contextlib.suppress(OSError):  # EIO once the child has closed the terminal
        while chunk := os.read(master, 65536):
            terminal += chunk
    os.close(master)
    out = proc.communicate(timeout=600)[0].decode()
    assert proc.returncode == 0
    assert "\x1b" not in out and "parity:" not in out and last_line(out).startswith("PASS: ")
    assert b"parity" in terminal  # the bar's description, drawn (and cleared) on the terminal
    piped = posexport_cli("parity", str(graph), "--runtimes", "ort-cpu", *SKETCH)
    assert piped.returncode == 0 and piped.stderr == ""


def test_python_m_posexport_and_a_library_import_without_the_cli():
    proc = subprocess.run([sys.executable, "-m", "posexport", "--version"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == f"posexport {importlib.metadata.version('posexport')}"
    code = "import sys, posexport; print(sorted(m for m in sys.modules if m.startswith('posexport_cli')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


# --- patch: folders made, parameters as used -------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_llama() -> tuple[Path, Path]:
    folder = sf.tiny_llama("torch-default", "default")  # 4 heads of 16, max_position_embeddings 64
    return folder, sf.torch_export(folder)


def test_patch_out_makes_its_folders_and_shows_what_it_recovered(torch_llama, tmp_path):
    _, model = torch_llama
    out = tmp_path / "new" / "sub" / "model.onnx"
    code, stdout, err = cli("patch", str(model), "--out", str(out))
    assert code == 0, stdout + err
    assert out.is_file() and out.with_name("model.onnx.data").is_file()
    line = next(line for line in stdout.splitlines() if line.startswith("patched "))
    shown = json.loads(line[line.index("{"):])
    assert shown["head_dim"] == shown["rotary_dim"] == 16 and shown["base"] == 10000.0 and shown["scaling"] == "default"
    assert "heads" not in shown and "max_positions" not in shown and "layout" not in shown  # never read from the graph
    # Exit codes agree with the last line: doctor --fail-on and model-parity, each both ways.
    for args, code_and_verdict in (
        (["doctor", model, "--fail-on"], (1, "FAIL: ")), (["doctor", out, "--fail-on"], (0, "PASS: 0 faults")),
        (["model-parity", "--model", out, "--against", model, "--prompt", "64"], (0, "PASS: ")),
        (["model-parity", "--model", out, "--against", model, "--prompt", "64", "--tolerance", "1e-12"], (1, "FAIL: ")),
    ):
        code, stdout, err = cli(*map(str, args))
        assert (code, last_line(stdout)[:len(code_and_verdict[1])]) == code_and_verdict, stdout + err
    # A patch that is refused makes no folder.
    refused = tmp_path / "other" / "model.onnx"
    one_error(*cli("patch", str(model), "--out", str(refused), "--base", "500000"), "")
    assert not (tmp_path / "other").exists()


def test_model_parity_with_a_missing_file_is_one_line(torch_llama, tmp_path):
    folder, model = torch_llama
    missing = tmp_path / "missing.onnx"
    for args, needle in ((["--model", missing, "--against-hf", folder], f"--model {missing}: no such file"),
                         (["--model", model, "--against", missing], f"--against {missing}: no such file"),
                         (["--model", model, "--against-hf", tmp_path], "no config.json")):
        one_error(*cli("model-parity", *map(str, args)), needle)


# --- optional dependencies ---------------------------------------------------------------------------------


def test_plot_without_matplotlib_is_one_line_before_the_bench(monkeypatch, tmp_path):
    import posexport.bench

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an absent package looks like to an import
    monkeypatch.setattr(posexport.bench, "run_from_options", lambda *a, **k: pytest.fail("the bench ran first"))
    one_error(*cli("bench", "--seqs", "8", "--plot", str(tmp_path / "b.png")), "--plot needs matplotlib, which is not installed: pip install 'posexport[plot]'")


def test_against_hf_without_transformers_is_one_line_before_any_run(monkeypatch, tmp_path, torch_llama):
    folder, model = torch_llama
    monkeypatch.setitem(sys.modules, "transformers", None)
    one_error(*cli("model-parity", "--model", str(model), "--against-hf", str(folder)),
              "--against-hf needs transformers, which is not installed: pip install 'posexport[hf]'")


def test_transformers_progress_bars_never_reach_the_output(torch_llama, monkeypatch):
    """Even with transformers imported and its bars switched on, model-parity --against-hf prints none;
    the same load outside the command does print one (so the check can fail)."""
    import transformers
    from transformers.utils import logging as hf_logging

    folder, model = torch_llama
    # As in a process where huggingface_hub was imported before the command ran, bars on.
    monkeypatch.setattr(sys.modules["huggingface_hub.utils.tqdm"], "HF_HUB_DISABLE_PROGRESS_BARS", False)
    hf_logging.enable_progress_bar()
    code, out, err = cli("model-parity", "--model", str(model), "--against", str(model), "--prompt", "4")
    assert code == 0, out + err
    _, out_hf, err_hf = cli("model-parity", "--model", str(model), "--against-hf", str(folder), "--prompt", "4")
    assert "Loading weights" not in out + err + out_hf + err_hf and "it/s" not in err_hf
    assert hf_logging.is_progress_bar_enabled()  # the command put the user's setting back
    shown = io.StringIO()
    with contextlib.redirect_stderr(shown):
        transformers.AutoModelForCausalLM.from_pretrained(str(folder))
    assert "Loading weights" in shown.getvalue()


def narrow(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, color_system=None)


def test_bench_medians_stay_whole_at_100_columns():
    """At 100 columns one wide table once cut medians to `392.1…`: each group is now its own table of five columns."""
    from posexport.bench import BenchResult, Row
    from posexport.reports.bench import render_terminal

    rows = [Row("rope", "ort-cpu-noopt", "bfloat16", 2048, subject, kind, [1, 2048, 32, 128], median, 12.3456, 11.0, ratio,
                note="cache of 131072 positions" if kind == "baseline" else "", layout="bshd", position=100000)
            for subject, kind, median, ratio in (("copy", "baseline", 392.1234, 1.0), ("contrib-full-cache", "baseline", 401.5678, 1.024),
                                                 ("portable", "backend", 1234.5678, 3.148))]
    console = narrow(100)
    render_terminal(BenchResult({"threads": 2, "load_average": [1.0, 1.0, 1.0], "repeats": 30, "warmup": 5}, rows, []), console)
    shown = console.file.getvalue()
    assert "…" not in shown and all(f"{r.median_ms:.3f}" in shown and f"{r.ratio_to_copy:.2f}" in shown for r in rows), shown
    assert max(map(len, shown.splitlines())) <= 100


def test_parity_keys_runtime_columns_that_do_not_fit_and_folds_the_parameters(graph):
    """At 80 columns five runtimes' names are columns of the properties grid: numbered, with the key below; the graph's
    line shows the parameters set (every one with --details), and the verdict's counts are singular where they are one."""
    from posexport.options import parity_from_options
    from posexport.reports import parity as reports

    names = ["torch", "reference", "ort-cpu", "ort-cpu-noopt", "openvino", "ort-cuda"]
    report = parity_from_options(graph, {}, runtimes=names, seqs=[17], batches=[1])
    console = narrow(80)
    reports.render_terminal(report, console)
    shown = console.file.getvalue()
    ran = [n for n in names if n not in report.unavailable]
    assert "…" not in shown and max(map(len, shown.splitlines())) <= 80
    assert "key: " + ", ".join(f"{i} = {n}" for i, n in enumerate(ran, 1)) in shown.replace("\n", " ").replace("  ", " ")
    head = shown.split("\n\n")[0].split("error = ")[0].replace("\n", " ")
    assert "head_dim 16" in head and "attention_factor" not in head and "unset; --details lists every parameter" in head
    console = narrow(1000)
    reports.render_terminal(report, console, details=True)
    assert "attention_factor null" in console.file.getvalue().splitlines()[0]
    unavailable = len(report.unavailable)
    assert shown.replace("\n", " ").rstrip().endswith(f"{unavailable} runtime{'s' * (unavailable != 1)} unavailable")
    assert "1 runtimes" not in shown and "1 known limitations" not in shown


def test_model_parity_shows_the_original_without_details(torch_llama, tmp_path):
    """--original's column is in the outputs table whatever --details says."""
    _, model = torch_llama
    out = tmp_path / "fixed.onnx"
    assert cli("patch", str(model), "--out", str(out))[0] == 0
    code, stdout, _ = cli("model-parity", "--model", str(out), "--against", str(model), "--original", str(model), "--runtimes", "ort-cpu")
    header = next(line for line in stdout.splitlines() if "case" in line and "output" in line)
    assert code == 0 and "original" in header


def test_counts_in_the_verdict_line_take_their_plural():
    """The issue saw "1 runtimes unavailable"."""
    from posexport.reports.parity import verdict_line
    from posexport.verdicts import Report

    one = Report(unavailable={"ort-cuda": "onnxruntime-gpu is not installed"})
    two = Report(unavailable={"ort-cuda": "not installed", "openvino": "not installed"})
    assert verdict_line(one) == "FAIL: nothing was compared (1 runtime unavailable)"
    assert verdict_line(two) == "FAIL: nothing was compared (2 runtimes unavailable)"
