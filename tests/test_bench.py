"""`posexport bench` runs and reports with the right structure (no timing is asserted: times are the
machine's, not the code's)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from posexport import bench
from posexport.errors import PosexportError

from .conftest import posexport_cli

SMALL = dict(head_dim=16, heads=2)


@pytest.fixture(scope="module")
def result() -> bench.BenchResult:
    cfg = bench.BenchConfig(params=SMALL, seqs=(16, 64), warmup=1, repeats=3, indexshare_layers=1, profile=True)
    return bench.run_bench(cfg)


def test_every_group_has_the_baselines_then_each_backend(result):
    groups: dict[int, list[bench.Row]] = {}
    for r in result.rows:
        if r.kind != "indexshare":
            groups.setdefault(r.seq, []).append(r)
    assert sorted(groups) == [16, 64]
    for seq, rows in groups.items():
        subjects = [r.subject for r in rows]
        assert subjects == ["copy", "naive-export", "torch-eager", "auto (ort)", "portable", "onnx23", "ort"], subjects
        copy = rows[0]
        assert copy.ratio_to_copy == 1.0 and copy.shape == [1, seq, 2, 16]
        for r in rows:
            assert r.median_ms > 0 and r.iqr_ms >= 0 and r.min_ms <= r.median_ms
            assert math.isclose(r.ratio_to_copy, r.median_ms / copy.median_ms)
        assert all(r.profile for r in rows if r.kind == "backend")
        assert all(0 <= share <= 1 for r in rows for _, share in r.profile)


def test_indexshare_rows_pair_fused_with_unfused(result):
    subjects = [r.subject for r in result.rows if r.kind == "indexshare" and r.seq == 16]
    assert subjects == ["indexshare-prompt", "indexshare-prompt-unfused", "indexshare-decode", "indexshare-decode-unfused"]


def test_meta_reports_threads_and_load(result):
    m = result.meta
    assert m["threads"] == 1 and m["repeats"] == 3 and len(m["load_average"]) == 3
    assert {"onnxruntime", "torch"} <= set(m["versions"])


def test_json_markdown_and_plot(result, tmp_path):
    data = json.loads(result.to_json())
    assert set(data) == {"meta", "rows", "targets"} and len(data["rows"]) == len(result.rows)
    text = bench.markdown(result, "size note")
    assert "| subject | median ms | IQR ms | min ms | × copy |" in text and "## Graph size" in text
    assert "load average" in text and "IndexShare attention block" in text
    bench.plot(result, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_targets_follow_design_7():
    def row(subject: str, ms: float) -> bench.Row:
        return bench.Row("rope", "ort-cpu", "float32", 2048, subject, "backend", list(bench.ROPE_TARGET_SHAPE), ms, 0.0, ms, ms / 10.0)

    rows = [row("copy", 10.0), row("naive-export", 60.0), row("auto (ort)", 11.0), row("portable", 45.0)]
    verdicts = {t["target"]: t for t in bench.check_targets(rows, bench.BenchConfig())}
    assert verdicts["rope auto (ort) ≤ 1.15× copy"]["met"]
    assert not verdicts["rope portable ≤ 4× copy"]["met"] and verdicts["rope portable ≤ 4× copy"]["miss"] == "missed by 12%"
    assert not verdicts["rope portable ≥ 1.5× faster than naive export"]["met"]


def test_graph_size_note_compares_with_one_table():
    note = bench.graph_size_note()
    assert "131072" in note and "64 MiB" in note


def test_cli_bench_writes_every_format(tmp_path):
    proc = posexport_cli("bench", "--seqs", "8", "--heads", "2", "--head-dim", "16", "--backends", "auto,portable",
                         "--warmup", "0", "--repeats", "3", "--json", str(tmp_path / "b.json"),
                         "--markdown", str(tmp_path / "b.md"), "--plot", str(tmp_path / "b.png"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert [r["subject"] for r in rows] == ["copy", "naive-export", "torch-eager", "auto (ort)", "portable"]
    assert all(np.isfinite(r["median_ms"]) for r in rows)
    md = (tmp_path / "b.md").read_text()
    assert "posexport bench --seqs 8" in md  # the command that made the file
    assert (tmp_path / "b.png").stat().st_size > 0


def test_an_option_no_encoding_takes_is_an_error():
    with pytest.raises(PosexportError, match="--hed-dim"):
        bench.check_params(["rope"], {"hed_dim": "16"})
