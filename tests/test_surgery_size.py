"""doctor and patch on a model with 300 MB of external data (a sparse file): neither loads the weights
(the process's peak memory is measured, and the meter is shown to see a load), the patched model runs in
onnxruntime with exact tables past the old limit, and every other tensor is carried byte for byte, by the
kernel or, where it cannot copy, through a bounded buffer."""

from __future__ import annotations

import errno
import filecmp
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from posexport import progress, surgery
from posexport.errors import PosexportError

from .size_model import ROWS, TABLE, error_past_limit, same_bytes, stored_span, synthetic_model

SIZE = 300 << 20
# Growth of the peak memory allowed to a step that reads the graph and a few small tables: a sixth of the weights.
ALLOWED = SIZE // 6
CLEAR_REFS = Path("/proc/self/clear_refs")


def status(field: str) -> int:
    """A /proc/self/status memory field, in bytes."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def peak_growth(step: Callable[[], object]) -> int:
    """Bytes the process's peak resident memory rises above its memory before ``step`` while it runs."""
    before = status("VmRSS")
    CLEAR_REFS.write_text("5")  # Linux: the peak (VmHWM) starts again from the current resident size
    step()
    return status("VmHWM") - before


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        CLEAR_REFS.write_text("5")
    except OSError as e:
        pytest.skip(f"the peak memory of this process cannot be reset here ({e.strerror}): Linux's /proc/self/clear_refs is needed")
    return synthetic_model(tmp_path_factory.mktemp("size"), SIZE)


def test_the_meter_sees_a_model_loaded_with_its_weights(model):
    assert peak_growth(lambda: onnx.load(str(model))) > 0.8 * SIZE


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_doctor_and_patch_leave_the_weights_on_disk(model, tmp_path, capsys, monkeypatch):
    report: dict = {}
    assert peak_growth(lambda: report.update(surgery.doctor(model))) < ALLOWED
    (site,) = report["sites"]
    assert site["kind"] == "rope-cache" and {f["fault"]: f["value"] for f in site["faults"]}["position-limit"] == ROWS
    out = tmp_path / "patched.onnx"
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.0)
    assert peak_growth(lambda: surgery.patch_file(model, out, position_limit=2 * ROWS)) < ALLOWED
    assert capsys.readouterr().err == ""  # no terminal: no progress
    assert surgery.doctor(out)["faults"] == 0
    assert same_bytes(stored_span(model, TABLE), stored_span(out, TABLE))
    again = tmp_path / "again" / "patched.onnx"
    again.parent.mkdir()
    monkeypatch.setattr(sys, "stderr", Terminal())
    surgery.patch_file(model, again, position_limit=2 * ROWS)
    assert "writing patched.onnx.data: 300.5 MiB in " in sys.stderr.getvalue()
    assert all(filecmp.cmp(out.with_name(n), again.with_name(n), shallow=False) for n in ("patched.onnx", "patched.onnx.data"))


def test_the_patched_model_runs_exactly_past_the_old_limit(model, tmp_path):
    out = tmp_path / "patched.onnx"
    surgery.patch_file(model, out, position_limit=2 * ROWS)
    assert error_past_limit(model, out) <= 2e-6
    with pytest.raises(Exception, match="out of range"):  # the source's own caches stop at ROWS
        error_past_limit(model, model)


def test_an_output_that_would_replace_the_source_data_is_refused(model, tmp_path):
    out = tmp_path / "linked.onnx"
    out.with_name("linked.onnx.data").symlink_to(model.with_name(model.name + ".data"))
    with pytest.raises(PosexportError, match="which is its external data"):
        surgery.patch_file(model, out, position_limit=2 * ROWS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linked.onnx.data"]


def test_where_the_kernel_cannot_copy_a_buffer_carries_the_same_bytes(model, tmp_path, monkeypatch):
    kernel, buffered = tmp_path / "kernel" / "p.onnx", tmp_path / "buffered" / "p.onnx"
    for out in (kernel, buffered):
        out.parent.mkdir()
    surgery.patch_file(model, kernel, position_limit=2 * ROWS)

    def cross_device(*args: object) -> int:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "copy_file_range", cross_device)  # as between two filesystems
    assert peak_growth(lambda: surgery.patch_file(model, buffered, position_limit=2 * ROWS)) < ALLOWED
    assert filecmp.cmp(kernel.with_name("p.onnx.data"), buffered.with_name("p.onnx.data"), shallow=False)


def test_the_size_benchmark_steps_run_on_this_model(model, tmp_path, capsys):
    """`make bench-size` times these very calls in subprocesses: each runs here, on the small model, and
    prints its seconds and peak (a benchmark nothing runs goes stale unseen)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("size_benchmark", Path(__file__).parents[1] / "benchmarks/size.py")
    size_benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(size_benchmark)
    out = tmp_path / "patched.onnx"
    for name in ("doctor", "patch", "model-parity"):
        size_benchmark.step(name, model, out)
        seconds, peak_kb = capsys.readouterr().out.split()
        assert float(seconds) > 0 and int(peak_kb) > 0, name
    assert same_bytes(stored_span(model, TABLE), stored_span(out, TABLE))
