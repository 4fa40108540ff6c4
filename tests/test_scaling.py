"""RoPE scalings as float64 maths: golden inverse frequencies worked out by hand from the formulas of
docs/encodings.md (or published values), relations between scalings, and parameter validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posexport.rope.encoding import RopeParams, reference
from posexport.errors import ParamError
from posexport.rope.scaling import frequencies

# d = 8, b = 10000: θ = 10000^(−2i/8) = [1, 0.1, 0.01, 0.001].
THETA8 = np.array([1.0, 0.1, 0.01, 0.001])


def params(**kw) -> RopeParams:
    base = dict(head_dim=8, heads=1, base=10000.0, max_positions=64)
    return RopeParams(**(base | kw))


def test_plain_golden():
    inv, a = frequencies(params())
    np.testing.assert_allclose(inv, THETA8, rtol=1e-15)
    assert a == 1.0


def test_linear_golden():
    inv, a = frequencies(params(scaling="linear", factor=4.0))
    np.testing.assert_allclose(inv, [0.25, 0.025, 0.0025, 0.00025], rtol=1e-15)
    assert a == 1.0


def test_ntk_golden():
    # b' = b·4^(8/6), so b'^(−i/4) = θ_i·4^(−i/3): 4^(−1/3) = 0.62996…, 4^(−2/3) = 0.39685…, 4^(−1) = 0.25.
    inv, a = frequencies(params(scaling="ntk", factor=4.0))
    np.testing.assert_allclose(inv, [1.0, 0.1 * 0.6299605249474366, 0.01 * 0.3968502629920499, 0.00025], rtol=1e-13)
    assert a == 1.0


def test_dynamic_golden():
    # s = 2, Lmax = 64. seq_len 128: ratio = 2·128/64 − 1 = 3, so inv_i = θ_i·3^(−i/3) (d = 8).
    p = params(scaling="dynamic", factor=2.0)
    inv, a = frequencies(p, 128)
    np.testing.assert_allclose(inv, [1.0, 0.1 * 0.6933612743506347, 0.01 * 0.4807498567691361, 0.001 / 3], rtol=1e-13)
    assert a == 1.0
    for seq_len in (1, 63, 64):
        np.testing.assert_allclose(frequencies(p, seq_len)[0], THETA8, rtol=1e-15)


def test_yarn_golden():
    # d = 16, b = 10000, L0 = 2048, s = 4: corr(32) = 16·ln(2048/(64π))/(2 ln 10000) = 2.016 -> low 2,
    # corr(1) = 16·ln(2048/(2π))/(2 ln 10000) = 5.026 -> high 6, so ramp = clamp((i − 2)/4, 0, 1).
    p = RopeParams(head_dim=16, heads=1, base=10000.0, max_positions=8192, scaling="yarn", factor=4.0, original_max_positions=2048)
    theta = 10000.0 ** (-np.arange(8) / 8)
    ramp = np.array([0, 0, 0, 0.25, 0.5, 0.75, 1, 1])
    inv, a = frequencies(p)
    np.testing.assert_allclose(inv, theta / 4 * ramp + theta * (1 - ramp), rtol=1e-14)
    assert a == pytest.approx(1 + 0.1 * math.log(4), rel=1e-15)  # 1.13863


def test_yarn_untruncated_and_attention_factors():
    p = RopeParams(head_dim=16, heads=1, base=10000.0, max_positions=8192, scaling="yarn", factor=4.0,
                   original_max_positions=2048, truncate=False)
    low = 16 * math.log(2048 / (2 * math.pi * 32)) / (2 * math.log(10000))
    high = 16 * math.log(2048 / (2 * math.pi * 1)) / (2 * math.log(10000))
    ramp = np.clip((np.arange(8) - low) / (high - low), 0, 1)
    theta = 10000.0 ** (-np.arange(8) / 8)
    np.testing.assert_allclose(frequencies(p)[0], theta / 4 * ramp + theta * (1 - ramp), rtol=1e-14)
    deepseek = dict(head_dim=16, heads=1, max_positions=8192, scaling="yarn", factor=40.0, original_max_positions=2048)
    assert frequencies(RopeParams(**deepseek, mscale=1.0, mscale_all_dim=1.0))[1] == 1.0
    assert frequencies(RopeParams(**deepseek, mscale=0.707, mscale_all_dim=1.0))[1] == pytest.approx(
        (0.1 * 0.707 * math.log(40) + 1) / (0.1 * math.log(40) + 1), rel=1e-15)
    assert frequencies(RopeParams(**deepseek, attention_factor=0.5))[1] == 0.5


def test_llama3_golden_llama31_8b():
    # LLaMA 3.1 8B: b = 500000, d = 128, s = 8, L0 = 8192, low 1, high 4 -> wavelength bands 2048 and 8192.
    p = RopeParams(head_dim=128, heads=1, base=500000.0, max_positions=131072, scaling="llama3", factor=8.0,
                   original_max_positions=8192, low_freq_factor=1.0, high_freq_factor=4.0)
    theta = 500000.0 ** (-np.arange(64) / 64)
    wavelength = 2 * np.pi / theta
    inv, a = frequencies(p)
    assert a == 1.0
    # Indices 0…28 have wavelengths < 2048 and keep θ; 35…63 exceed 8192 and get θ/8; 29…34 blend.
    assert wavelength[28] < 2048 < wavelength[29] and wavelength[34] < 8192 < wavelength[35]
    np.testing.assert_array_equal(inv[:29], theta[:29])
    np.testing.assert_allclose(inv[35:], theta[35:] / 8, rtol=1e-15)
    gamma = (8192 / wavelength[29:35] - 1) / (4 - 1)
    np.testing.assert_allclose(inv[29:35], (1 - gamma) * theta[29:35] / 8 + gamma * theta[29:35], rtol=1e-14)
    assert np.all(np.diff(inv) < 0)  # still strictly decreasing across the bands


def test_longrope_golden():
    # L0 = 64, Lmax = 256: s = 4, a = sqrt(1 + ln 4 / ln 64) = sqrt(4/3).
    p = params(scaling="longrope", max_positions=256, original_max_positions=64,
               short_factor=(1.0, 2.0, 3.0, 4.0), long_factor=(2.0, 4.0, 8.0, 16.0))
    short, a_short = frequencies(p, 64)
    long, a_long = frequencies(p, 65)
    np.testing.assert_allclose(short, [1.0, 0.05, 0.01 / 3, 0.00025], rtol=1e-15)
    np.testing.assert_allclose(long, [0.5, 0.025, 0.00125, 0.0000625], rtol=1e-15)
    assert a_short == a_long == pytest.approx(1.1547005383792515, rel=1e-15)
    assert frequencies(p.__class__(**{**p.__dict__, "attention_factor": 1.25}), 65)[1] == 1.25


# --- relations between scalings ---------------------------------------------------------------------


@pytest.mark.parametrize("d, base, s", [(8, 10000.0, 4.0), (128, 500000.0, 8.0), (64, 1e6, 2.5)])
def test_linear_is_plain_divided_by_factor(d, base, s):
    plain, _ = frequencies(RopeParams(head_dim=d, base=base))
    linear, _ = frequencies(RopeParams(head_dim=d, base=base, scaling="linear", factor=s))
    np.testing.assert_allclose(linear, plain / s, rtol=1e-15)


def test_dynamic_equals_plain_up_to_max_positions_and_differs_past():
    plain, _ = frequencies(RopeParams(head_dim=64, max_positions=4096))
    p = RopeParams(head_dim=64, max_positions=4096, scaling="dynamic", factor=4.0)
    for seq_len in (1, 4095, 4096):
        np.testing.assert_array_equal(frequencies(p, seq_len)[0], plain)
    previous = plain
    for seq_len in (4097, 8192, 16384):
        inv = frequencies(p, seq_len)[0]
        assert inv[0] == 1.0 and np.all(inv[1:] < previous[1:])  # the base only grows with the length
        previous = inv


def test_yarn_lies_between_plain_and_interpolated():
    d, s = 128, 4.0
    plain, _ = frequencies(RopeParams(head_dim=d, base=1e6, max_positions=131072))
    inv, _ = frequencies(RopeParams(head_dim=d, base=1e6, max_positions=131072, scaling="yarn", factor=s, original_max_positions=32768))
    assert np.all(inv <= plain * (1 + 1e-15)) and np.all(inv >= plain / s * (1 - 1e-15))
    assert inv[0] == plain[0] and inv[-1] == pytest.approx(plain[-1] / s, rel=1e-15)


def test_llama3_keeps_high_and_divides_low_frequencies():
    plain, _ = frequencies(RopeParams(head_dim=128, base=500000.0, max_positions=131072))
    inv, _ = frequencies(RopeParams(head_dim=128, base=500000.0, max_positions=131072, scaling="llama3", factor=8.0,
                                    original_max_positions=8192, low_freq_factor=1.0, high_freq_factor=4.0))
    assert inv[0] == plain[0] and inv[-1] == pytest.approx(plain[-1] / 8, rel=1e-15)
    assert np.all(inv <= plain) and np.all(inv >= plain / 8 * (1 - 1e-15))


def test_partial_rotary_scales_only_rotary_dim():
    p = RopeParams(head_dim=64, rotary_dim=16, scaling="linear", factor=2.0)
    inv, _ = frequencies(p)
    np.testing.assert_allclose(inv, 10000.0 ** (-np.arange(8) / 8) / 2, rtol=1e-15)


def test_reference_decides_longrope_and_dynamic_on_the_batch_max(rng):
    """The oracle's decision is seq_len = max(position_ids) + 1 over the whole batch."""
    p = params(scaling="longrope", max_positions=256, original_max_positions=64,
               short_factor=(1.0, 2.0, 3.0, 4.0), long_factor=(2.0, 4.0, 8.0, 16.0))
    x = rng.standard_normal((2, 1, 1, 8))
    alone = reference(p, {"x": x[:1], "position_ids": np.array([[10]])})
    with_long_neighbour = reference(p, {"x": x, "position_ids": np.array([[10], [64]])})
    assert not np.allclose(alone, with_long_neighbour[:1])
    long = frequencies(p, 65)[0]
    a = math.sqrt(4 / 3)
    c, s = np.cos(10 * long) * a, np.sin(10 * long) * a
    xa, xb = x[0, 0, 0, :4], x[0, 0, 0, 4:]
    np.testing.assert_allclose(with_long_neighbour[0, 0, 0], np.concatenate([xa * c - xb * s, xb * c + xa * s]), rtol=1e-12)


# --- what each scaling declares: its cos/sin source and its steady span ---------------------------------


EXAMPLES = {
    "default": {},
    "linear": dict(factor=2.0),
    "ntk": dict(factor=2.0),
    "dynamic": dict(factor=2.0),
    "yarn": dict(factor=4.0, original_max_positions=32),
    "llama3": dict(factor=8.0, original_max_positions=32, low_freq_factor=1.0, high_freq_factor=4.0),
    "longrope": dict(original_max_positions=32, short_factor=(1.0, 2.0, 3.0, 4.0), long_factor=(2.0, 4.0, 8.0, 16.0)),
    "proportional": dict(proportion=0.5, factor=2.0),
}


def test_every_scaling_declares_a_known_cos_sin_source():
    from posexport.rope import scaling, sources

    assert set(EXAMPLES) == set(scaling.SCALINGS)
    for name, spec in scaling.SCALINGS.items():
        assert spec.source in sources.SOURCES, name
        p = params(scaling=name, **EXAMPLES[name])
        arrays = sources.source_of(p).arrays(p)
        assert len(arrays) == 4 and all(a.ndim >= 1 for a in arrays.values())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_frequencies_hold_still_over_the_steady_span(name):
    """Below steady_span the frequencies do not depend on the call's length (where the relative-position
    property is checked); a scaling decided per call changes them right after it."""
    from posexport.rope import scaling

    p = params(scaling=name, **EXAMPLES[name])
    span = scaling.steady_span(p)
    first = frequencies(p, 1)
    np.testing.assert_array_equal(frequencies(p, span)[0], first[0])
    assert frequencies(p, span)[1] == first[1]
    if span < p.position_limit:
        assert not np.array_equal(frequencies(p, span + 1)[0], first[0])
    assert span == (scaling.switch_length(p) if name in ("dynamic", "longrope") else p.position_limit)


# --- validation --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(scaling="linear"), "--scaling linear needs --factor (not given)"),
        (dict(factor=2.0), "--factor 2.0: does not apply to the default scaling"),
        (dict(scaling="linear", factor=2.0, beta_fast=8.0), "--beta-fast 8.0: does not apply to the linear scaling"),
        (dict(scaling="linear", factor=0.0), "--factor 0.0: must be a finite number > 0"),
        (dict(scaling="llama3", factor=8.0, original_max_positions=32), "--scaling llama3 needs --low-freq-factor (not given)"),
        (dict(scaling="llama3", factor=8.0, original_max_positions=32, low_freq_factor=4.0, high_freq_factor=1.0), "--high-freq-factor 1.0"),
        (dict(scaling="yarn", factor=4.0, original_max_positions=128), "--original-max-positions 128: must be in [1, max_positions=64]"),
        (dict(scaling="yarn", factor=4.0, beta_fast=1.0, beta_slow=2.0), "--beta-fast 1.0"),
        (dict(scaling="longrope", short_factor=(1.0,) * 4), "--scaling longrope needs --long-factor (not given)"),
        (dict(scaling="longrope", short_factor=(1.0,) * 3, long_factor=(1.0,) * 4), "--short-factor '1,1,1': the longrope scaling needs rotary_dim/2 = 4"),
        (dict(scaling="dynamic", factor=2.0, head_dim=2), "--rotary-dim 2: the dynamic scaling needs rotary_dim > 2"),
    ],
)
def test_bad_scaling_parameters_name_the_parameter(kw, needle):
    with pytest.raises(ParamError) as e:
        params(**kw)
    assert needle in str(e.value)


def test_cli_style_values_parse_into_scaling_parameters():
    from posexport.rope.encoding import RopeEncoding

    p = RopeEncoding().params(head_dim="8", scaling="longrope", max_positions="256", original_max_positions="64",
                              short_factor="1,2,3,4", long_factor="2,4,8,16")
    assert p.short_factor == (1.0, 2.0, 3.0, 4.0) and p.original_max_positions == 64
    assert RopeEncoding().params(scaling="yarn", factor="4", truncate="false").truncate is False
