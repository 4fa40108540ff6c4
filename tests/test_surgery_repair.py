"""Repair on request: a site whose parameters disagree with the model's config is rebuilt to the config's rope
only with `patch --replace-mismatched`, and the config.json an exporter writes beside its model is the default
source of doctor and patch. The case users meet: the suite's trained Llama saved by transformers 5 with
`rope_parameters` base 100000, exported by optimum-onnx, whose transformers 4.57 reads no `rope_parameters` and
silently builds base 10000. Held against float64 transformers on real text, both ways: the export fails, the
repaired model passes."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from zoo import exporters as ef
from . import trained_fixtures as tf
from .conftest import posexport_cli as cli

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
BASE = 100000.0


@functools.lru_cache(maxsize=None)
def misread() -> tuple[Path, Path]:
    """(the transformers 5 folder, optimum's export of it)."""
    folder = tf.variant("llama", "base100k", rope_theta=BASE)
    try:
        return folder, tf.export("llama", "optimum", folder)
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


def parity(model: Path, folder: Path, out: Path, *extra: str) -> tuple[int, dict]:
    report = out / f"{model.parent.name}-parity.json"
    proc = cli("model-parity", "--model", model, "--against-hf", folder, "--prompt", "200", "--text", tf.TEXT,
               "--runtimes", "ort-cpu", "--json", report, *extra)
    return proc.returncode, json.loads(report.read_text())


def errors(report: dict) -> dict[str, float]:
    return {r["output"]: r["comparison"]["normalised"] for r in report["results"]}


def test_doctor_finds_the_misread_from_the_config_beside_the_model():
    _, model = misread()
    proc = cli("doctor", model, "--fail-on")
    assert proc.returncode == 1, proc.stdout
    assert f"rope parameters from {model.parent / 'config.json'}, beside the model" in proc.stdout
    assert "exporter fault config-spelling-misread (known of this exporter)" in proc.stdout
    assert "plain rope base 10000" in proc.stdout and "--replace-mismatched" in proc.stdout
    # The same export judged against what it was read as (a config in 4.x spelling, base 10000): nothing misread.
    plain = cli("doctor", model, "--base", "10000")
    assert "config-spelling-misread" not in plain.stdout and "beside the model" not in plain.stdout


def test_patch_refuses_a_mismatch_without_the_flag_and_names_it(tmp_path):
    folder, model = misread()
    proc = cli("patch", model, "--out", tmp_path / "fixed" / "model.onnx", "--from-model", folder)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
    assert "refusing to guess (pass --replace-mismatched" in proc.stderr
    assert not (tmp_path / "fixed").exists()


def test_replace_mismatched_repairs_what_optimum_misread(tmp_path):
    folder, model = misread()
    fixed = tmp_path / "fixed" / "model.onnx"
    proc = cli("patch", model, "--out", fixed, "--from-model", folder, "--replace-mismatched")
    assert proc.returncode == 0, proc.stderr
    assert '"base": 100000.0' in proc.stdout and 'replaced: it held {"head_dim": 16, "base": 10000.0}' in proc.stdout
    code, before = parity(model, folder, tmp_path)
    assert code == 1 and errors(before)["logits"] > 1e-2 and errors(before)["present.0.key"] > 0.1
    code, after = parity(fixed, folder, tmp_path)
    assert code == 0, after
    assert errors(after)["logits"] < 1e-5 and max(errors(after).values()) < 1e-5
    tokens = after["results"][0]["tokens"]
    assert tokens["agreed"] == tokens["positions"] == 200
    assert before["results"][0]["tokens"]["agreed"] < 190  # the misread export picks other tokens
    # The repaired folder is one optimum's client reads, and its doctor finds nothing misread.
    assert (fixed.parent / "config.json").is_file()
    assert "config-spelling-misread" not in cli("doctor", fixed).stdout
