"""M-RoPE (Qwen2-VL): three frequency sections turned by the temporal, height and width rows of
position_ids [3, batch, seq]; exact tables, both authorings, every rope backend, every runtime."""

from __future__ import annotations

import numpy as np
import pytest

from posexport import export, verdicts
from posexport.errors import ParamError
from posexport.rope import encoding as rope
from posexport.rope.mrope import MRopeParams, reference

PARAMS = {"head_dim": 16, "heads": 2, "mrope_section": "2,3,3"}


@pytest.mark.parametrize("source, backend, opset, dtype", [
    ("script", "portable", 18, "float32"),
    ("script", "portable", 18, "bfloat16"),
    ("torch", "portable", 18, "float16"),
    ("script", "onnx23", 23, "float32"),
    ("script", "ort", 18, "float32"),
])
def test_parity_on_every_runtime(source, backend, opset, dtype):
    art = export.build("mrope", PARAMS, dtype=dtype, source=source, backend=backend, opset=opset)
    report = verdicts.run_parity(art, None, seqs=(1, 17), batches=(2,), properties=(backend == "portable"))
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]
    assert {"ort-cpu", "torch"} <= set(report.runtimes)


def test_each_row_turns_its_own_section(rng):
    p = MRopeParams(head_dim=16, heads=1, mrope_section=(2, 3, 3))
    x = rng.standard_normal((1, 5, 1, 16))
    rows = np.stack([np.arange(5), np.arange(5) + 7, np.arange(5) + 100])[:, None, :]
    y = reference(p, {"x": x, "position_ids": rows})
    inv = rope.inv_freq_and_factor(rope.RopeParams(head_dim=16, heads=1, base=p.base))[0]
    for k, part in enumerate((slice(0, 2), slice(2, 5), slice(5, 8))):
        theta = rows[k, 0][:, None] * inv[part]
        a, b = x[0, :, 0, part], x[0, :, 0, 8 + part.start: 8 + part.stop]
        np.testing.assert_allclose(y[0, :, 0, part], a * np.cos(theta) - b * np.sin(theta), atol=1e-12)


def test_three_equal_rows_are_plain_rope(rng):
    x = rng.standard_normal((2, 9, 2, 16))
    positions = rng.integers(0, 100_000, size=(2, 9))
    ours = reference(MRopeParams(head_dim=16, heads=2, mrope_section=(2, 3, 3)), {"x": x, "position_ids": np.stack([positions] * 3)})
    plain = rope.reference(rope.RopeParams(head_dim=16, heads=2, base=1000000.0), {"x": x, "position_ids": positions})
    np.testing.assert_allclose(ours, plain, atol=1e-12)


def test_sections_must_cover_half_the_head():
    with pytest.raises(ParamError, match="mrope-section"):
        MRopeParams(head_dim=16, heads=1, mrope_section=(2, 3, 4))


INTERLEAVED = {"head_dim": 16, "heads": 2, "mrope_section": "4,2,2", "interleaved": True}


# The torch source of both gathered forms is one module (InterleavedCosSin): the axial test builds it.
@pytest.mark.parametrize("source, backend, opset, dtype", [
    ("script", "portable", 18, "float32"),
    ("script", "onnx23", 23, "bfloat16"),
    ("script", "ort", 18, "float16"),
])
def test_interleaved_sections_parity_on_every_runtime(source, backend, opset, dtype):
    art = export.build("mrope", INTERLEAVED, dtype=dtype, source=source, backend=backend, opset=opset)
    report = verdicts.run_parity(art, None, seqs=(1, 17), batches=(2,), properties=(backend == "portable"))
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]


def test_interleaved_frequencies_turn_with_rows_by_residue(rng):
    """Qwen3-VL: frequency j turns with height when j ≡ 1 (mod 3), j < 3·h; width when j ≡ 2, j < 3·w."""
    p = MRopeParams(head_dim=16, heads=1, mrope_section=(4, 2, 2), interleaved=True)
    x = rng.standard_normal((1, 5, 1, 16))
    rows = np.stack([np.arange(5), np.arange(5) + 7, np.arange(5) + 100])[:, None, :]
    y = reference(p, {"x": x, "position_ids": rows})
    inv = rope.inv_freq_and_factor(rope.RopeParams(head_dim=16, heads=1, base=p.base))[0]
    for j, row in enumerate((0, 1, 2, 0, 1, 2, 0, 0)):
        theta = rows[row, 0] * inv[j]
        np.testing.assert_allclose(y[0, :, 0, j], x[0, :, 0, j] * np.cos(theta) - x[0, :, 0, 8 + j] * np.sin(theta), atol=1e-12)
    chunked = reference(MRopeParams(head_dim=16, heads=1, mrope_section=(4, 2, 2)), {"x": x, "position_ids": rows})
    assert np.max(np.abs(chunked - y)) > 0.1  # the two layouts differ


AXIAL = {"head_dim": 16, "heads": 2, "mrope_section": "4,4", "axial": True}


@pytest.mark.parametrize("source, backend, opset, dtype", [
    ("script", "portable", 18, "float32"),
    ("torch", "portable", 18, "float32"),
])
def test_axial_form_parity_on_every_runtime(source, backend, opset, dtype):
    art = export.build("mrope", AXIAL, dtype=dtype, source=source, backend=backend, opset=opset)
    assert [s.dims for s in art.encoding.inputs(art.params)][1] == (2, "batch", "seq")
    report = verdicts.run_parity(art, None, seqs=(1, 17), batches=(2,), properties=(backend == "portable"))
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]


def test_axial_form_turns_height_then_width_with_half_width_frequencies(rng):
    """Qwen2-VL's vision rope: frequency j < d/4 turns with the height row, the rest with the width row,
    both θ_i = base^(−2i/(d/2))."""
    p = MRopeParams(head_dim=16, heads=1, mrope_section=(4, 4), axial=True, base=10000.0)
    x = rng.standard_normal((1, 5, 1, 16))
    rows = np.stack([np.arange(5) + 3, np.arange(5) * 2])[:, None, :]
    y = reference(p, {"x": x, "position_ids": rows})
    theta_i = 10000.0 ** (-np.arange(4) * 2 / 8)
    for j in range(8):
        theta = rows[j // 4, 0] * theta_i[j % 4]
        np.testing.assert_allclose(y[0, :, 0, j], x[0, :, 0, j] * np.cos(theta) - x[0, :, 0, 8 + j] * np.sin(theta), atol=1e-12)
