"""`posexport bench --model FIXED --against ORIGINAL` on a tiny onnxruntime-genai Llama-3 and its patch:
both models timed interleaved on the same feeds, ratios and file sizes reported, a call the original
cannot run reported with the runtime's own message; the target verdict both ways."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posexport import surgery
from posexport.bench.models import ModelRow, target
from posexport.errors import PosexportError

from . import surgery_fixtures as sf

posexport_cli = pytest.importorskip("posexport_cli.main")


def cli(*args: object) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(posexport_cli.app, [str(a) for a in args])
    return result.exit_code, result.output, result.exception


@pytest.fixture(scope="module")
def patched(tmp_path_factory) -> tuple[Path, Path]:
    pytest.importorskip("onnxruntime_genai")
    folder = sf.tiny_llama("genai-llama3", "llama3", max_positions=2048, base=500000.0)
    original = sf.genai_export(folder)
    fixed = tmp_path_factory.mktemp("bench-models") / "model.onnx"
    surgery.patch_file(original, fixed, surgery.requested_values(from_model=folder), 4096)
    return original, fixed


def test_bench_model_against_original_reports_ratios_sizes_and_failures(patched, tmp_path):
    original, fixed = patched
    code, out, error = cli("bench", "--model", fixed, "--against", original, "--seqs", "16,64", "--decode-positions", "100,3000",
                           "--warmup", "1", "--repeats", "3", "--json", tmp_path / "cost.json", "--markdown", tmp_path / "cost.md")
    assert code == 0, (out, error)
    data = json.loads((tmp_path / "cost.json").read_text())
    rows = {r["call"]: r for r in data["rows"]}
    assert list(rows) == ["prompt 16", "prompt 64", "decode at position 100", "decode at position 3000"]
    for call in ("prompt 16", "prompt 64", "decode at position 100"):
        r = rows[call]
        assert r["model_ms"] > 0 and r["against_ms"] > 0 and math.isclose(r["ratio"], r["model_ms"] / r["against_ms"])
    # Past its 2048 cached rows the original raises; the patched model (4096 rows) would run, so no ratio.
    late = rows["decode at position 3000"]
    assert late["ratio"] is None and "--against model.onnx fails" in late["note"] and "cos_cache" in late["note"]
    assert data["target"]["untimed"] == ["decode at position 3000"]
    assert data["meta"]["model_bytes"] > data["meta"]["against_bytes"] > 0  # the patch adds two-level tables
    assert "| prompt 64 |" in (tmp_path / "cost.md").read_text() and "file size: --model" in out


def test_bench_model_refuses_a_half_pair_and_a_model_with_other_inputs(patched):
    original, fixed = patched
    assert isinstance(cli("bench", "--model", fixed)[2], PosexportError)
    other = sf.torch_export(sf.as_plain(sf.tiny_llama("torch-dynamic", "dynamic")))  # the export test_surgery_cli makes
    code, _, error = cli("bench", "--model", other, "--against", original, "--seqs", "16")
    assert isinstance(error, PosexportError) and "are not --model's" in str(error)
    assert isinstance(cli("bench", "--model", fixed, "--against", original, "--seqs", "16,x")[2], PosexportError)


def test_target_met_within_three_percent_and_missed_past_it():
    rows = [ModelRow("prompt 512", 512, 0, ratio=1.01), ModelRow("decode at position 2048", 1, 2048, ratio=0.99)]
    assert target(rows)["met"]
    slow = rows + [ModelRow("prompt 2048", 2048, 0, ratio=1.2)]
    verdict = target(slow)
    assert not verdict["met"] and verdict["worst"] == {"call": "prompt 2048", "ratio": 1.2}
    assert not target([ModelRow("prompt 512", 512, 0)])["met"]  # nothing timed is not a pass
