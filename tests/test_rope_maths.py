"""The rope oracle itself, checked against an independent derivation and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from posexport.rope.encoding import RopeParams, reference
from posexport.errors import ParamError
from posexport.tables import plain_inv_freq
from posexport.tables import build_two_level, split_rows


def complex_rope(x: np.ndarray, pos: np.ndarray, base: float, rot: int, pair_layout: str) -> np.ndarray:
    """RoPE as complex multiplication z·e^{ipθ}, written independently of posexport (bshd)."""
    n = rot // 2
    theta = base ** (-2.0 * np.arange(n) / rot)
    phase = np.exp(1j * pos[..., None].astype(np.float64) * theta)[:, :, None, :]
    r = x[..., :rot].astype(np.float64)
    z = r[..., :n] + 1j * r[..., n:rot] if pair_layout == "half" else r[..., 0::2] + 1j * r[..., 1::2]
    w = z * phase
    if pair_layout == "half":
        out = np.concatenate([w.real, w.imag], axis=-1)
    else:
        out = np.stack([w.real, w.imag], axis=-1).reshape(r.shape)
    return np.concatenate([out, x[..., rot:]], axis=-1)


@pytest.mark.parametrize("pair_layout", ["half", "interleaved"])
@pytest.mark.parametrize("rot", [16, 10])
def test_reference_equals_complex_rotation(pair_layout, rot, rng):
    p = RopeParams(head_dim=16, heads=3, rotary_dim=rot, base=500.0, pair_layout=pair_layout)
    x = rng.standard_normal((2, 9, 3, 16))
    pos = rng.integers(0, 50_000, size=(2, 9))
    got = reference(p, {"x": x, "position_ids": pos})
    np.testing.assert_allclose(got, complex_rope(x, pos, 500.0, rot, pair_layout), rtol=0, atol=1e-12)


def test_bhsd_is_bshd_transposed(rng):
    x = rng.standard_normal((2, 5, 3, 8))
    pos = rng.integers(0, 1000, size=(2, 5))
    bshd = reference(RopeParams(head_dim=8, heads=3), {"x": x, "position_ids": pos})
    bhsd = reference(RopeParams(head_dim=8, heads=3, layout="bhsd"), {"x": x.transpose(0, 2, 1, 3), "position_ids": pos})
    np.testing.assert_allclose(bhsd.transpose(0, 2, 1, 3), bshd, atol=1e-15)


def test_golden_values():
    # head_dim 4, base 100: θ = (1, 0.1). Position 2, x = [1, 2, 3, 4] in half layout pairs (1,3) and (2,4).
    p = RopeParams(head_dim=4, heads=1, base=100.0)
    y = reference(p, {"x": np.array([[[[1.0, 2.0, 3.0, 4.0]]]]), "position_ids": np.array([[2]])})
    c0, s0, c1, s1 = np.cos(2.0), np.sin(2.0), np.cos(0.2), np.sin(0.2)
    expected = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1]
    np.testing.assert_allclose(y.ravel(), expected, atol=1e-15)


def test_plain_inv_freq_formula():
    np.testing.assert_allclose(plain_inv_freq(8, 10000.0), [1.0, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75], rtol=1e-15)


@pytest.mark.parametrize("limit", [1, 2, 1000, 4096, 131072, 1 << 20])
def test_two_level_rows_cover_the_limit(limit):
    fine, coarse = split_rows(limit)
    assert fine * coarse >= limit
    assert fine + coarse <= 3 * int(np.ceil(np.sqrt(limit))) + 2


def test_two_level_tables_reproduce_every_angle():
    inv_freq = plain_inv_freq(64, 10000.0)
    t = build_two_level(inv_freq, 5000, scale=1.5)
    p = np.arange(t.limit)
    q, r = p // t.fine_rows, p % t.fine_rows
    cos = t.coarse_cos[q] * t.fine_cos[r] - t.coarse_sin[q] * t.fine_sin[r]
    sin = t.coarse_sin[q] * t.fine_cos[r] + t.coarse_cos[q] * t.fine_sin[r]
    angle = p[:, None] * inv_freq
    np.testing.assert_allclose(cos, 1.5 * np.cos(angle), atol=1e-9)
    np.testing.assert_allclose(sin, 1.5 * np.sin(angle), atol=1e-9)


def test_llama31_tables_are_small():
    t = build_two_level(plain_inv_freq(128, 500000.0), 131072)
    assert (t.fine_rows, t.coarse_rows) == (512, 256)


@pytest.mark.parametrize(
    "bad, name",
    [
        (dict(head_dim=127), "head_dim"),
        (dict(head_dim=0), "head_dim"),
        (dict(head_dim=64, rotary_dim=96), "rotary_dim"),
        (dict(head_dim=64, rotary_dim=31), "rotary_dim"),
        (dict(base=1.0), "base"),
        (dict(base=0.5), "base"),
        (dict(heads=0), "heads"),
        (dict(pair_layout="zigzag"), "pair_layout"),
        (dict(layout="sbhd"), "layout"),
        (dict(max_positions=0), "max_positions"),
        (dict(max_positions=4096, position_limit=100), "position_limit"),
    ],
)
def test_bad_parameters_name_themselves(bad, name):
    with pytest.raises(ParamError) as e:
        RopeParams(**bad)
    assert e.value.name == name
    assert f"--{name.replace('_', '-')}" in str(e.value)
