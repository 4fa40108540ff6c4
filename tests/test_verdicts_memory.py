"""model-parity never holds a model's logits whole: its own process compares them block by block as the
session's child sends them, so its peak grows by far less than the logits (which in float64 beside their
float32 copy, as it once held them, are three times their float32 size). Measured by the kernel: the peak
resident memory (VmHWM) reset before the run (/proc/self/clear_refs), against the resident memory before
it. benchmarks/parity_memory.py records the peaks against the session's own by vocabulary and length."""

from __future__ import annotations

from pathlib import Path

import pytest

from posexport.verdicts import FeedCase, model_parity

from .vocab_model import wide_vocabulary_llama

pytest.importorskip("transformers")
VOCAB, TOKENS = 65536, 1024  # logits of 256 MiB in float32


def status_kb(field: str) -> int:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(f"{field}:"))
    return int(line.split()[1])


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="the peak is read from Linux's /proc/self/status")
def test_the_logits_are_never_held_whole(tmp_path):
    model = wide_vocabulary_llama(tmp_path, VOCAB)
    model_parity(model, against_hf=tmp_path, cases=[FeedCase(16)], runtimes=["ort-cpu"], random_ids=True)  # warm: imports, fork server
    Path("/proc/self/clear_refs").write_text("5")  # the peak starts again from what is resident now
    before = status_kb("VmRSS")
    report = model_parity(model, against_hf=tmp_path, cases=[FeedCase(TOKENS)], runtimes=["ort-cpu"], random_ids=True)
    grown_mb = (status_kb("VmHWM") - before) / 1024
    (logits,) = report.results
    assert logits.status == "pass" and logits.tokens.positions == TOKENS
    logits_mb = VOCAB * TOKENS * 4 / 2 ** 20
    assert grown_mb < 0.5 * logits_mb, f"model-parity's own peak grew {grown_mb:.0f} MB for {logits_mb:.0f} MB of logits"
