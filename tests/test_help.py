"""Fast feedback: every command's --help, and a mistyped name, are answered without importing torch, onnxscript,
onnxruntime or transformers (a fresh interpreter's sys.modules, so the check cannot depend on timing); a wrong
name is answered with the one most likely meant."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from posexport_cli.main import COMMANDS

from .test_parity_cli import cli

HEAVY = ("torch", "onnxscript", "onnxruntime", "transformers", "onnx")

# In one fresh interpreter: each command line in turn through the CLI's own entry, then the heavy modules loaded.
PROBE = """
import contextlib, io, json, sys
from posexport_cli.main import app
loaded = {}
for args in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(args, prog_name="posexport", standalone_mode=False)
        except SystemExit:
            pass
        except Exception as e:  # a mistyped name: the library's one-line error
            loaded.setdefault("errors", []).append(str(e))
    loaded[" ".join(args)] = [m for m in json.loads(sys.argv[2]) if m in sys.modules]
print(json.dumps(loaded))
"""


def loaded_by(lines: list[list[str]]) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(lines), json.dumps(HEAVY)], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


def test_help_of_every_command_and_a_mistyped_encoding_import_no_heavy_library():
    lines = [["--help"], *([name, "--help"] for name in COMMANDS), ["build", "--encoding", "rop"], ["parity", "--encoding", "rop"]]
    loaded = loaded_by(lines)
    assert {line: modules for line, modules in loaded.items() if line != "errors" and modules} == {}
    assert len(loaded["errors"]) == 2 and all("did you mean rope?" in e for e in loaded["errors"])


def test_the_check_can_fail():
    """The same probe sees torch once an encoding's own --help loads that encoding."""
    assert "torch" in loaded_by([["build", "--encoding", "alibi", "--help"]])["build --encoding alibi --help"]


@pytest.mark.parametrize("args, line", [
    (["build", "--encoding", "rop"], "--encoding 'rop': unknown encoding; did you mean rope?"),
    (["build", "--encoding", "rope", "--scaling", "yarm", "--head-dim", "8"], "--scaling 'yarm': unknown scaling; did you mean yarn?"),
    (["build", "--preset", "llama-3.1"], "--preset 'llama-3.1': unknown preset; did you mean llama-3.1-8b?"),
    (["build", "--dtype", "float61"], "--dtype 'float61': unknown dtype; did you mean float16?"),
    (["parity", "--runtimes", "ort-cpux", "--head-dim", "8"], "--runtimes 'ort-cpux': unknown runtime; did you mean ort-cpu?"),
    (["build", "--dtpye", "float16", "--head-dim", "8"], "--dtpye: no such option; did you mean --dtype?"),
    (["build", "--head-dims", "8"], "--head-dims: no such option; did you mean --head-dim?"),
    (["model-parity", "--modle", "x.onnx"], "--modle: no such option; did you mean --model?"),
    (["bench", "--encodinsg", "rope"], "--encodinsg: none of the encodings rope takes this option; did you mean --encodings?"),
    (["buidl"], "'buidl': unknown command; did you mean build?"),
])
def test_a_wrong_name_is_answered_with_the_one_meant(args, line):
    code, out, err = cli(*args)
    assert code == 2 and err.startswith(f"error: {line}") and len(err.strip().splitlines()) == 1, err


def test_doctor_and_patch_refuse_an_option_rope_does_not_take(tmp_path):
    """A mistyped --from-model was once read as a rope parameter and reported as the site's fault."""
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")
    for command in ("doctor", "patch"):
        code, _, err = cli(command, str(model), "--out", str(tmp_path / "fixed.onnx"), "--from-modle", "dir") if command == "patch" \
            else cli(command, str(model), "--from-modle", "dir")
        assert code == 2 and "--from-modle: no such option; did you mean --from-model?" in err, err


def test_an_unknown_model_type_names_the_nearest_in_one_short_line(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "lama", "hidden_size": 64, "num_attention_heads": 4}))
    code, _, err = cli("build", "--from-model", str(tmp_path))
    assert code == 2 and "did you mean 'llama'?" in err and len(err) < 600, err


def completed(*words: str) -> list[str]:
    """What typer's bash completion (the script `posexport --install-completion` installs) offers for the last word."""
    import os
    from pathlib import Path

    script = Path(sys.executable).parent / "posexport"
    env = {**os.environ, "_POSEXPORT_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(("posexport", *words)),
           "COMP_CWORD": str(len(words))}
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_shell_completion_offers_the_registry_presets_commands_and_options():
    from posexport.registry import ENCODINGS
    from posexport.rope.config import preset_names

    assert completed("build", "--encoding", "ro") == [n for n in ENCODINGS if n.startswith("ro")] != []
    assert completed("build", "--preset", "llama") == [n for n in preset_names() if n.startswith("llama")] != []
    assert completed("bui") == ["build"] and completed("parity", "--run") == ["--runtimes"]
    assert completed("build", "--encoding", "xyz") == []
