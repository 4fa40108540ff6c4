"""Sinusoidal encoding (docs/encodings.md): the oracle against hand values and a loop, both artifacts on
onnxruntime CPU and the reference evaluator in every dtype (offsets, past the cached rows), positions
outside the graph, properties, bad parameters, the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posexport.contract import Case
from posexport.encodings.sinusoidal import SinusoidalParams, reference
from posexport.registry import get_encoding

from .conftest import artifact, session
from .encoding_checks import DTYPES, RUNTIMES, check_bad_params, check_feeds, cli_build

SINUSOIDAL = get_encoding("sinusoidal")
CONFIGS = {"interleaved": dict(d_model=64), "concat": dict(d_model=48, pair_layout="concat", base=500.0),
           "concat-cos": dict(d_model=40, pair_layout="concat-cos", base=300.0)}
TORCH_CONFIG = {"float32": "interleaved", "float16": "concat", "bfloat16": "concat-cos"}
# (batch, seq, start, ragged): from 0, per-row offsets, a long run, past the 512 cached rows, decode far out.
CASES = [(1, 1, 0, False), (3, 17, 1000, True), (1, 2048, 0, False), (2, 33, 100_000, True), (3, 1, 131_071, False)]


def test_golden_values():
    # d_model 4, base 100: ω = (1, 0.1); position 3.
    x = np.array([[[0.5, -1.0, 2.0, 0.25]]])
    pos = np.array([[3]])
    s0, c0, s1, c1 = math.sin(3), math.cos(3), math.sin(0.3), math.cos(0.3)
    interleaved = reference(SinusoidalParams(d_model=4, base=100.0), {"x": x, "position_ids": pos})
    np.testing.assert_allclose(interleaved.ravel(), x.ravel() + [s0, c0, s1, c1], rtol=0, atol=1e-15)
    concat = reference(SinusoidalParams(d_model=4, base=100.0, pair_layout="concat"), {"x": x, "position_ids": pos})
    np.testing.assert_allclose(concat.ravel(), x.ravel() + [s0, s1, c0, c1], rtol=0, atol=1e-15)
    cosines_first = reference(SinusoidalParams(d_model=4, base=100.0, pair_layout="concat-cos"), {"x": x, "position_ids": pos})
    np.testing.assert_allclose(cosines_first.ravel(), x.ravel() + [c0, c1, s0, s1], rtol=0, atol=1e-15)


def test_reference_equals_the_paper_loop(rng):
    """PE(p, 2i) = sin(p / b^(2i/D)), PE(p, 2i+1) = cos(p / b^(2i/D)), one entry at a time."""
    d = 12
    pos = rng.integers(0, 200_000, size=(2, 5))
    x = rng.standard_normal((2, 5, d))
    got = reference(SinusoidalParams(d_model=d), {"x": x, "position_ids": pos}) - x
    for b in range(2):
        for s in range(5):
            for i in range(d // 2):
                angle = pos[b, s] / 10000 ** (2 * i / d)
                assert got[b, s, 2 * i] == pytest.approx(math.sin(angle), abs=1e-9)
                assert got[b, s, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-9)


def run_cases(art, runtime: str, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for batch, seq, start, ragged in CASES:
        feeds = SINUSOIDAL.feeds(art.params, Case("t", {"batch": batch, "seq": seq}, start=start, ragged=ragged), art.options.dtype, rng)
        assert np.all(feeds["x"] != 0)
        check_feeds(art, runtime, feeds)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_script_parity(config, dtype, runtime):
    run_cases(artifact("sinusoidal", dtype=dtype, **CONFIGS[config]), runtime)


@pytest.fixture(scope="module")
def cli_torch_float16(tmp_path_factory):
    """The float16 torch artifact (the concat config), built by the CLI."""
    return cli_build(tmp_path_factory.mktemp("sinusoidal"), "sinusoidal", "--d-model", "48", "--pair-layout", "concat",
                     "--base", "500", "--source", "torch", "--dtype", "float16")


def torch_artifact(dtype: str, request):
    if dtype == "float16":
        return request.getfixturevalue("cli_torch_float16")
    return artifact("sinusoidal", dtype=dtype, source="torch", **CONFIGS[TORCH_CONFIG[dtype]])


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_export_parity(dtype, runtime, request):
    run_cases(torch_artifact(dtype, request), runtime)


def test_float32_stays_exact_past_the_cached_rows(rng):
    """Positions near 2^17 come from angle addition, still within 1e-6·(log2 p + 1) — and far better."""
    art = artifact("sinusoidal", **CONFIGS["interleaved"])
    assert art.manifest["tables"]["fine_cos"] == [512, 32] and art.manifest["tables"]["coarse_cos"] == [256, 32]
    feeds = {"x": rng.standard_normal((1, 64, 64)).astype(np.float32), "position_ids": np.arange(131_008, 131_072)[None]}
    assert check_feeds(art, "ort-cpu", feeds) < 1e-6


@pytest.mark.parametrize("runtime", ["ort-cpu", "ort-cpu-noopt", "reference", "torch"])
@pytest.mark.parametrize("source", ["script", "torch"])
def test_positions_outside_the_graph_raise(source, runtime, rng):
    art = artifact("sinusoidal", source=source, **CONFIGS["interleaved"])
    limit = art.params.position_limit
    x = rng.standard_normal((1, 2, 64)).astype(np.float32)
    check_feeds(art, runtime, {"x": x, "position_ids": np.array([[limit - 2, limit - 1]])})
    for bad in ([[limit - 1, limit]], [[-1, 0]], [[0, 10 * limit]]):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": x, "position_ids": np.array(bad)})


@pytest.mark.parametrize("dtype", DTYPES)
def test_properties_hold_on_the_graph(dtype):
    art = artifact("sinusoidal", dtype=dtype, **CONFIGS["interleaved"])
    for prop in SINUSOIDAL.properties(art.params):
        result = prop.check(session(art, "ort-cpu").run, art.params, art.options.dtype, np.random.default_rng(2))
        assert result.ok, f"{prop.name}: {result.detail}"


def test_shift_check_rejects_a_learned_table():
    """A random table has no fixed linear map from PE(p) to PE(p + k): the property must say so."""
    learned = artifact("learned", d_model=64, max_positions=4096)
    p = SinusoidalParams(d_model=64, position_limit=4096)
    (shift,) = [prop for prop in SINUSOIDAL.properties(p) if prop.name == "linear-shift"]
    result = shift.check(session(learned, "ort-cpu").run, p, learned.options.dtype, np.random.default_rng(0))
    assert not result.ok and result.error > 1e-3


@pytest.mark.parametrize("values, needle", [
    (dict(d_model=63), "--d-model 63"),
    (dict(d_model=0), "--d-model 0"),
    (dict(base=1.0), "--base 1.0"),
    (dict(pair_layout="half"), "--pair-layout 'half'"),
    (dict(position_limit=0), "--position-limit 0"),
])
def test_bad_parameters_name_the_parameter(values, needle):
    check_bad_params("sinusoidal", values, needle)


def test_cli_build_script(tmp_path, rng):
    art = cli_build(tmp_path, "sinusoidal", "--d-model", "32", "--position-limit", "4096", "--dtype", "bfloat16")
    assert art.manifest["params"] == {"d_model": 32, "base": 10000.0, "pair_layout": "interleaved", "position_limit": 4096}
    feeds = {"x": rng.standard_normal((2, 9, 32)).astype(art.options.dtype.numpy), "position_ids": rng.integers(0, 4096, (2, 9))}
    check_feeds(art, "ort-cpu", feeds)


def test_cli_build_torch(cli_torch_float16):
    m = cli_torch_float16.manifest
    assert m["params"] == {"d_model": 48, "base": 500.0, "pair_layout": "concat", "position_limit": 131072}
    assert (m["source"], m["dtype"]) == ("torch", "float16") and [i["name"] for i in m["inputs"]] == ["x", "position_ids"]


def test_a_short_position_limit_is_swept_within_it():
    """A graph covering 13 positions (16 once rounded up): the default sweep keeps to them (its longer lengths dropped, its far
    and decode cases at the last positions) and passes; linear-shift, which needs more rows than unknowns,
    is not declared; asking for a length past the limit reports the graph raising, not a pass."""
    from posexport import verdicts

    art = artifact("sinusoidal", d_model=16, position_limit=13)
    limit = SINUSOIDAL.position_limit(art.params)  # 13 rounded up to the tables' P·Q
    cases = SINUSOIDAL.cases(art.params)
    assert all(c.start + c.axes["seq"] <= limit for c in cases) and f"decode@{limit - 1}" in {c.label for c in cases}
    report = verdicts.run_parity(art, ["ort-cpu", "reference"])
    assert report.passed and {p.property for p in report.properties} == {"bounded", "unique-rows", "raises-past-limit"}
    assert not verdicts.run_parity(art, ["ort-cpu"], seqs=(limit + 1,), properties=False).passed


def test_cli_build_cosines_first(tmp_path, rng):
    """`--pair-layout concat-cos` (MusicGen's [cos | sin]) through the CLI: the manifest says so and the graph
    agrees with the float64 reference."""
    art = cli_build(tmp_path, "sinusoidal", "--d-model", "20", "--pair-layout", "concat-cos", "--position-limit", "4096")
    assert art.manifest["params"] == {"d_model": 20, "base": 10000.0, "pair_layout": "concat-cos", "position_limit": 4096}
    feeds = {"x": rng.standard_normal((2, 9, 20)).astype(np.float32), "position_ids": rng.integers(0, 4096, (2, 9))}
    check_feeds(art, "ort-cpu", feeds)
