"""The compatibility page: rendered from the matrix's JSON (a FIXED cell and a refused one), the
committed docs/compatibility.md is exactly what docs/compatibility.json says, and a cell's verdict
follows its parity report both ways."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from matrix.cell import verdict
from matrix.page import render

DOCS = Path(__file__).resolve().parents[1] / "docs"
META = {"command": "python -m matrix --json m.json --markdown m.md", "time_utc": "2026-12-01 22:00", "cpu_count": 2, "seconds": 90,
        "versions": {"posexport": "0.1.0"}, "exporters": {"genai": "onnxruntime-genai builder", "optimum": "optimum-cli"},
        "cells_planned": 2}
FIXED = {"architecture": "llama", "exporter": "genai", "exported": True, "sites": ["rope-cache"], "faults": ["position-limit"],
         "verdict": "FIXED", "reason": "", "errors": {"32": {"before": 2.8e-6, "after": 2.6e-6, "ok": True},
                                                      "136": {"before": "fails: cos_cache dimension 0", "after": 4.5e-6, "ok": True}},
         "time_ratio": 1.01, "model_type": "llama", "unpatched": "raises at position 64"}
REFUSED = {"architecture": "llama", "exporter": "optimum", "exported": True, "sites": ["trig-unrecognised"], "faults": ["unrecognised"],
           "verdict": "REFUSED", "reason": "not yet: posexport refuses: Cos node '/model/rotary_emb/Cos'", "model_type": "llama"}


def test_page_shows_each_cell_with_its_numbers_and_reason():
    page = render({"meta": META, "cells": [FIXED, REFUSED]})
    assert "make matrix    # runs: python -m matrix --json m.json --markdown m.md" in page
    assert "2 of 2 cells run: FIXED 1, REFUSED 1." in page and "1.5 min" in page
    assert "| llama | llama | default | FIXED | REFUSED |" in page
    assert ("| llama | genai | yes | rope-cache | position-limit | FIXED | raises at position 64 | 32: 2.8e-06 → 2.6e-06; 136: fails "
            "→ 4.5e-06 | 1.01× |  |" in page)
    assert "| REFUSED | — | — | — | not yet: posexport refuses: Cos node '/model/rotary_emb/Cos' |" in page


def test_page_carries_its_key_and_an_index_by_model_type():
    page = render({"meta": META, "cells": [FIXED, REFUSED]})
    key = page.split("## Key", 1)[1].split("## Verdicts", 1)[0]
    for verdict in ("FIXED", "NOTHING TO PATCH", "REFUSED", "EXPORT WRONG", "EXPORT FAILED", "NOT JUDGED"):
        assert f"| {verdict} | " in key
    for says in ("raises at position N", "error over the bound from an N-token prompt", "nothing within max positions"):
        assert f"| {says} | " in key
    assert "| `llama` | llama | genai | optimum (REFUSED) |" in page.split("## By model type", 1)[1]


def test_committed_page_is_what_its_json_says():
    data = json.loads((DOCS / "compatibility.json").read_text())
    assert data["cells"] and all(c["verdict"] == "FIXED" or c["reason"] for c in data["cells"])
    assert (DOCS / "compatibility.md").read_text() == render(data)


def result(case: str, error: float, original: str = ""):  # noqa: ANN201
    from posexport.verdicts import CaseResult, Comparison

    cmp = Comparison(error, error, error, 1e-4)
    return CaseResult("model.onnx", case, "ort-cpu", "pass" if cmp.passed else "fail", cmp,
                      "" if cmp.passed else f"error {error:.2e} > tolerance 0.0001", output="logits", original=original)


def test_without_the_patch_says_where_the_original_raises_or_that_nothing_goes_wrong():
    from posexport.verdicts import Report

    from matrix.cell import unpatched
    from matrix.models import ARCHITECTURES

    llama = ARCHITECTURES["llama"]  # prompts of 32 and 136 tokens, max_position_embeddings 64
    raised = Report(results=[result("prompt 32", 2e-6, "2.5e-06"), result("prompt 136", 4e-6, "fails: cos_cache dimension 0")])
    assert unpatched({"limit": 64}, raised, llama, Path("model.onnx"), None) == "raises at position 64"
    assert unpatched({"limit": None}, raised, llama, Path("model.onnx"), None) == "raises at a 136-token prompt"
    within = Report(results=[result("prompt 32", 2e-6, "2.5e-06"), result("prompt 136", 4e-6, "3.9e-06")])
    assert unpatched({"limit": None}, within, llama, Path("model.onnx"), None) == (
        "nothing within max positions (64; within the bound up to 136 tokens)")
    unrun = Report(results=[result("prompt 32", 2e-6, ""), result("prompt 136", 4e-6, "")])
    assert unpatched({"limit": None}, unrun, llama, Path("model.onnx"), None).startswith("not measured")


def test_verdict_is_fixed_only_when_every_prompt_is_within_tolerance():
    from posexport.verdicts import Report

    cell: dict = {}
    verdict(cell, Report(results=[result("prompt 32", 2e-6)]))
    assert cell == {"verdict": "FIXED", "reason": ""}
    verdict(cell, Report(results=[result("prompt 32", 2e-6), result("prompt 136", 3e-2)]))
    assert cell == {"verdict": "NOT FIXED", "reason": "not yet: patched model at prompt 136: error 3.00e-02 > tolerance 0.0001"}
    # Off inside the trained length before the patch and as much after: the exporter's own fault.
    verdict(cell, Report(results=[result("prompt 32", 0.34, "3.35e-01"), result("prompt 136", 0.4, "fails: Gather")]))
    assert cell["verdict"] == "EXPORT WRONG" and cell["reason"].startswith(
        "exporter wrong upstream: its logits are 3.4e-01 off float64 transformers at prompt 32, inside the trained length, "
        "before the patch (3.4e-01 after)")
    # Off inside before the patch, but the patch changed it: posexport's to answer for.
    verdict(cell, Report(results=[result("prompt 32", 0.1, "3.35e-01"), result("prompt 136", 0.4, "fails: Gather")]))
    assert cell["verdict"] == "NOT FIXED"


def test_rerun_keeps_every_other_cell_and_is_recorded(tmp_path):
    from matrix.__main__ import planned

    path = tmp_path / "m.json"
    path.write_text(json.dumps({"meta": META, "cells": [FIXED, REFUSED]}))
    args = argparse.Namespace(json=path, resume=False, rerun=True)
    argv = ["--rerun", "--exporters", "optimum", "--json", "m.json", "--markdown", "m.md"]
    meta, order, kept = planned(args, argv, [("llama", "optimum")])
    assert order == [("llama", "genai"), ("llama", "optimum")] and kept == {("llama", "genai"): FIXED}
    assert meta["command"] == META["command"] and meta["cells_planned"] == 2
    (rerun,) = meta["reruns"]
    assert rerun["command"] == "python -m matrix --rerun --exporters optimum --json m.json --markdown m.md" and rerun["cells"] == 1
    page = render({"meta": meta | {"reruns": [rerun | {"seconds": 150}]}, "cells": [FIXED, REFUSED]})
    assert f"Re-run {rerun['time_utc']} UTC, 2.5 min: 1 cell, `{rerun['command']}`" in page
