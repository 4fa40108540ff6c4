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


# GLM-4V's form: sections on a partial rotary (rotary_dim < head_dim), interleaved pairs (rotate_half_llm).
PARTIAL = {"head_dim": 16, "heads": 2, "rotary_dim": 8, "mrope_section": "2,1,1", "pair_layout": "interleaved"}


@pytest.mark.parametrize("params, source, backend, opset, dtype", [
    (PARTIAL, "script", "portable", 18, "float32"),
    (PARTIAL, "torch", "portable", 18, "float16"),
    ({**PARTIAL, "layout": "bsh"}, "script", "onnx23", 23, "bfloat16"),
    (PARTIAL, "script", "ort", 18, "float32"),
    # GLM-4.5V's: half-split pairs on the partial rotary; Qwen3-VL's sections and the axial form on one too.
    ({**PARTIAL, "pair_layout": "half", "layout": "bhsd"}, "script", "ort", 18, "float16"),
    ({**PARTIAL, "rotary_dim": 12, "mrope_section": "2,2,2", "interleaved": True}, "script", "portable", 18, "float32"),
    ({**PARTIAL, "mrope_section": "2,2", "axial": True}, "torch", "portable", 18, "float32"),
])
def test_partial_rotary_and_pair_layouts_parity_on_every_runtime(params, source, backend, opset, dtype):
    art = export.build("mrope", params, dtype=dtype, source=source, backend=backend, opset=opset)
    report = verdicts.run_parity(art, None, seqs=(1, 17), batches=(2,), properties=(backend == "portable"))
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]
    assert {"ort-cpu", "torch"} <= set(report.runtimes)


def glm_rotation(x, rows, base, rotary_dim, sections, interleaved_pairs):
    """float64, channel by channel from GLM-4V's formulas: θ_j = base^(−2j/rotary_dim) turned by the row of
    frequency j's chunk; pairs (2j, 2j + 1) (interleaved) or (j, j + rotary_dim/2); channels past rotary_dim
    unchanged."""
    n = rotary_dim // 2
    row_of = np.repeat(np.arange(3), sections)
    y = x.copy()
    for j in range(n):
        theta = rows[row_of[j], 0] * base ** (-2 * j / rotary_dim)
        a, b = (2 * j, 2 * j + 1) if interleaved_pairs else (j, j + n)
        y[0, :, 0, a] = x[0, :, 0, a] * np.cos(theta) - x[0, :, 0, b] * np.sin(theta)
        y[0, :, 0, b] = x[0, :, 0, b] * np.cos(theta) + x[0, :, 0, a] * np.sin(theta)
    return y


@pytest.mark.parametrize("pair_layout", ["interleaved", "half"])
def test_partial_rotary_turns_the_leading_channels_in_their_pairs(rng, pair_layout):
    p = MRopeParams(head_dim=16, heads=1, rotary_dim=8, mrope_section=(2, 1, 1), pair_layout=pair_layout, base=10000.0)
    x = rng.standard_normal((1, 6, 1, 16))
    rows = np.stack([np.arange(6) + 40, np.arange(6) * 3, np.arange(6) + 900])[:, None, :]
    y = reference(p, {"x": x, "position_ids": rows})
    expected = glm_rotation(x, rows, 10000.0, 8, (2, 1, 1), pair_layout == "interleaved")
    np.testing.assert_allclose(y, expected, atol=1e-12)
    np.testing.assert_array_equal(y[..., 8:], x[..., 8:])
    # The verdict the other way: the other pair layout, or the whole head rotated, is far off.
    other = glm_rotation(x, rows, 10000.0, 8, (2, 1, 1), pair_layout != "interleaved")
    whole = reference(MRopeParams(head_dim=16, heads=1, mrope_section=(4, 2, 2), pair_layout=pair_layout, base=10000.0),
                      {"x": x, "position_ids": rows})
    assert np.max(np.abs(other - y)) > 0.1 and np.max(np.abs(whole - y)) > 0.1


@pytest.mark.parametrize("values, message", [
    ({"rotary_dim": 7, "mrope_section": (2, 1, 1)}, "rotary-dim"),
    ({"rotary_dim": 18, "mrope_section": (2, 1, 1)}, "rotary-dim"),
    ({"rotary_dim": 8, "mrope_section": (4, 2, 2)}, "rotary_dim/2 = 4"),
    ({"rotary_dim": 8, "mrope_section": (4, 4), "axial": True}, "rotary_dim/4 = 2"),
    ({"pair_layout": "deinterleave"}, "pair-layout"),
])
def test_partial_rotary_and_pair_layout_refused_in_one_line(values, message):
    with pytest.raises(ParamError, match=message) as caught:
        MRopeParams(**{"head_dim": 16, "heads": 1, "mrope_section": (4, 2, 2), **values})
    assert "\n" not in str(caught.value)
