"""`posexport bench` runs and reports with the right structure (no timing is asserted: times are the
machine's, not the code's)."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from posexport import bench
from posexport.errors import PosexportError
from posexport.reports import bench as reports
from posexport.runtimes import get_runtime

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
        assert subjects == ["copy", "naive-export", "contrib-full-cache", "torch-eager", "auto (ort)", "portable", "onnx23", "ort"], subjects
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
    assert set(data) == {"schema_version", "meta", "rows", "targets"} and len(data["rows"]) == len(result.rows)
    text = reports.markdown(result, "size note")
    assert "| subject | median ms | IQR ms | min ms | × copy |" in text and "## Graph size" in text
    assert "load average" in text and "IndexShare attention block" in text
    reports.plot(result, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_targets_judge_the_ratios_to_copy():
    def row(subject: str, ms: float, shape=bench.ROPE_TARGET_SHAPE, position: int = 0) -> bench.Row:
        return bench.Row("rope", "ort-cpu", "float32", shape[1], subject, "backend", list(shape), ms, 0.0, ms, ms / 10.0, position=position)

    rows = [row("copy", 10.0), row("naive-export", 60.0), row("auto (ort)", 11.0), row("portable", 45.0)]
    rows += [row("copy", 10.0, BSH), row("contrib-full-cache", 10.5, BSH), row("auto (ort)", 11.0, BSH)]
    rows += [row("copy", 10.0, BHSD), row("auto (ort)", 16.0, BHSD)]
    rows += [row("contrib-full-cache", 0.008, DECODE, 100_000), row("auto (ort)", 0.010, DECODE, 100_000),
             row("auto (ort)", 1.0, DECODE, 1000)]  # another position: not the decode target's row
    verdicts = {t["target"]: t for t in bench.check_targets(rows)}
    assert verdicts["rope auto (ort) ≤ 1.15× copy"]["met"] and verdicts["rope bsh auto (ort) ≤ 1.15× copy"]["met"]
    assert verdicts["rope bsh auto (ort) ≤ 1.10× contrib op with a full cache"]["measured"] == round(11.0 / 10.5, 3)
    assert not verdicts["rope bhsd auto (ort) ≤ 1.5× copy"]["met"]
    assert verdicts["rope decode @100000 auto (ort) ≤ 1.5× contrib op with a full cache"]["measured"] == 1.25
    assert not verdicts["rope portable ≤ 4× copy"]["met"] and verdicts["rope portable ≤ 4× copy"]["miss"] == "missed by 12%"
    assert not verdicts["rope portable ≥ 1.5× faster than naive export"]["met"]


BSH, BHSD, DECODE = [1, 2048, 4096], [1, 32, 2048, 128], [1, 1, 4096]


def test_layouts_and_decode_positions_each_get_their_groups():
    """--layouts and --decode-positions: one group per (layout, call), each with its copy and the contrib
    op with a full cache covering the call's positions."""
    cfg = bench.BenchConfig(params=SMALL, backends=("auto",), layouts=("bsh", "bhsd"), seqs=(8,), decode_positions=(5000,),
                            warmup=0, repeats=3)
    rows = bench.run_bench(cfg).rows
    groups = {(r.layout, r.seq, r.position): r.shape for r in rows if r.subject == "copy"}
    assert groups == {("bsh", 8, 0): [1, 8, 32], ("bsh", 1, 5000): [1, 1, 32], ("bhsd", 8, 0): [1, 2, 8, 16], ("bhsd", 1, 5000): [1, 2, 1, 16]}
    contrib = [r for r in rows if r.subject == "contrib-full-cache"]
    assert all(np.isfinite(r.median_ms) for r in contrib)
    assert {r.note for r in contrib if r.position == 5000} == {"cache of 5001 positions"}


def test_subjects_are_timed_round_robin():
    """Warm-up runs first, then every round times each subject once, in a shuffled order."""
    order: list[str] = []
    calls = [lambda name=name: order.append(name) for name in "abc"]
    timings = bench.timing.time_interleaved(calls, warmup=1, repeats=20)
    assert order[:3] == ["a", "b", "c"] and len(timings) == 3 and all(t[0] >= 0 for t in timings)
    rounds = [order[3 + 3 * i : 6 + 3 * i] for i in range(20)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds) and len({tuple(r) for r in rounds}) > 1


def test_graph_size_note_compares_with_one_table():
    note = bench.graph_size_note()
    assert "131072" in note and "64 MiB" in note


def test_cli_bench_writes_every_format(tmp_path, monkeypatch):
    """The command run in this process as the console script runs it (its argv names `posexport`)."""
    from posexport_cli import main

    args = ["bench", "--seqs", "8", "--heads", "2", "--head-dim", "16", "--backends", "auto,portable", "--warmup", "0", "--repeats", "3",
            "--json", str(tmp_path / "b.json"), "--markdown", str(tmp_path / "b.md"), "--plot", str(tmp_path / "b.png")]
    monkeypatch.setattr(sys, "argv", ["posexport", *args])
    with pytest.raises(SystemExit) as exited:
        main.main()
    assert exited.value.code == 0
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert [r["subject"] for r in rows] == ["copy", "naive-export", "contrib-full-cache", "torch-eager", "auto (ort)", "portable"]
    assert all(np.isfinite(r["median_ms"]) for r in rows)
    md = (tmp_path / "b.md").read_text()
    assert "posexport bench --seqs 8" in md  # the command that made the file
    assert (tmp_path / "b.png").stat().st_size > 0


def test_an_option_no_encoding_takes_is_an_error():
    with pytest.raises(PosexportError, match="--hed-dim"):
        bench.check_params(["rope"], {"hed_dim": "16"})


def test_openvino_is_timed_through_the_runtime_registry():
    """Any registered runtime can be benchmarked: openvino's session binds its inputs once and the copy
    baseline's output is checked on it like on onnxruntime."""
    ok, why = get_runtime("openvino").available()
    if not ok:
        pytest.skip(f"openvino unavailable: {why}")
    cfg = bench.BenchConfig(params=SMALL, runtimes=("openvino",), backends=("portable",), seqs=(8,), warmup=0, repeats=3)
    result = bench.run_bench(cfg)
    assert [(r.runtime, r.subject) for r in result.rows] == [
        ("openvino", "copy"), ("openvino", "naive-export"), ("openvino", "contrib-full-cache"), ("openvino", "torch-eager"),
        ("openvino", "portable")]
    assert all(np.isfinite(r.median_ms) and r.median_ms > 0 for r in result.rows if r.subject != "contrib-full-cache")
    assert "openvino" in result.meta["runtimes"] and not result.meta["skipped_runtimes"]


def test_a_runtime_that_cannot_run_a_subject_says_why_in_its_row():
    cfg = bench.BenchConfig(params=SMALL, runtimes=("torch", "reference"), backends=("ort",), seqs=(8,), warmup=0, repeats=3)
    rows = {(r.runtime, r.subject): r for r in bench.run_bench(cfg).rows}
    assert "no torch module" in rows["torch", "copy"].note and math.isnan(rows["torch", "copy"].median_ms)
    assert rows["torch", "torch-eager"].median_ms > 0
    assert ("torch", "ort") not in rows  # torch runs the module, the same for every backend: timed once
    assert "com.microsoft" in rows["reference", "ort"].note and math.isnan(rows["reference", "ort"].median_ms)
    assert rows["reference", "copy"].ratio_to_copy == 1.0


def test_unavailable_and_unknown_runtimes():
    with pytest.raises(PosexportError, match="--runtimes 'tensorrt': unknown runtime"):
        bench.run_bench(bench.BenchConfig(params=SMALL, runtimes=("tensorrt",), seqs=(8,)))
    result = bench.run_bench(bench.BenchConfig(params=SMALL, runtimes=("ort-cuda",), seqs=(8,), repeats=3))
    if "ort-cuda" in result.meta["skipped_runtimes"]:
        assert result.rows == [] and "CUDAExecutionProvider" in result.meta["skipped_runtimes"]["ort-cuda"]


def test_options_as_the_command_line_gives_them():
    cfg = bench.config_from_options(["--head-dim", "16", "--heads", "2"], encodings="rope, alibi", seqs="8,16", indexshare_seqs="",
                                    runtimes="openvino", threads=2)
    assert cfg.encodings == ("rope", "alibi") and cfg.seqs == (8, 16) and cfg.indexshare_seqs == () and cfg.threads == 2
    assert cfg.runtimes == ("openvino",) and cfg.params == {"head_dim": "16", "heads": "2"}
    with pytest.raises(PosexportError, match="--seqs '8,x'"):
        bench.config_from_options(seqs="8,x")
    with pytest.raises(PosexportError, match="--seqs '0': every value must be ≥ 1"):
        bench.config_from_options(seqs="0")
    with pytest.raises(PosexportError, match="--hed-dim"):
        bench.config_from_options(["--hed-dim", "16"])


def test_report_files_go_through_the_one_writer(result, tmp_path):
    with pytest.raises(PosexportError, match="--json /proc/nope/b.json: cannot write there"):
        reports.write_reports(result, json_out="/proc/nope/b.json")
    reports.write_reports(result, markdown_out=tmp_path / "b.md")
    assert "## Graph size" in (tmp_path / "b.md").read_text()
