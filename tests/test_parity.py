"""The parity engine: sweeps, byte-identical inputs, judgement against the oracle, reports that
round-trip, and the generic property checks (which must hold on right outputs and fail on wrong ones)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posexport import export, verdicts
from posexport.encodings import properties
from posexport.reports import parity as reports
from posexport.dtypes import DTYPES
from posexport.errors import PosexportError
from posexport.registry import ENCODINGS
from posexport.runtimes import RUNTIMES

from .conftest import artifact

F32 = DTYPES["float32"]


@pytest.fixture(scope="module")
def full_sweep() -> verdicts.Report:
    art = artifact("rope", head_dim=16, heads=2, max_positions=512)
    return verdicts.run_parity(art, pairwise=True)


def test_default_sweep_covers_the_lengths_that_break_deployments(full_sweep):
    p = artifact("rope", head_dim=16, heads=2, max_positions=512).params
    cases = {r.case: r for r in full_sweep.results if r.runtime == "ort-cpu"}
    seqs = {r.axes["seq"] for r in cases.values()}
    assert {1, 2, 17, 512, 4096} <= seqs and {r.axes["batch"] for r in cases.values()} == {1, 3}
    assert any(label.endswith("-offsets") for label in cases)
    largest = {label: r.largest_position for label, r in cases.items()}
    assert any(label.startswith("past-trained") and pos > p.max_positions for label, pos in largest.items())
    fine_rows = artifact("rope", head_dim=16, heads=2, max_positions=512).manifest["tables"]["fine_cos"][0]
    assert any(label.startswith("far") and pos > 10 * fine_rows for label, pos in largest.items())
    assert any(label.startswith("decode") and cases[label].axes["seq"] == 1 and pos >= 3000 for label, pos in largest.items())


def test_a_correct_graph_passes_on_every_available_runtime(full_sweep):
    assert full_sweep.passed, reports.verdict_line(full_sweep)
    ran = set(full_sweep.runtimes)
    assert {"torch", "reference", "ort-cpu", "ort-cpu-noopt", "openvino"} <= ran
    assert set(full_sweep.unavailable) | ran == {name for name, rt in RUNTIMES.items() if rt.runs_by_default}
    for r in full_sweep.results:
        c = r.comparison
        assert c.normalised <= c.bound and c.p99 <= c.normalised and c.max_abs >= 0
    held = {(p.property, p.runtime) for p in full_sweep.properties if p.status == "pass"}
    assert {("relative-position", rt) for rt in ran} <= held and {("norm-preserved", rt) for rt in ran} <= held
    # Graph optimisation on or off, onnxruntime's numerics agree here to the bit.
    pairs = {r.runtime: r for r in full_sweep.pairwise if r.case == "far@100000"}
    assert pairs["ort-cpu vs ort-cpu-noopt"].comparison.max_abs == 0


def test_report_json_round_trips_with_errors_and_infinities():
    from .test_parity_faults import run

    report = run("frozen", ("reference", "ort-cpu", "openvino"))
    assert any(r.status == "error" for r in report.results) and any(p.error == math.inf for p in report.properties)
    text = verdicts.to_json(report)
    again = verdicts.from_json(text)
    assert again == report and verdicts.to_json(again) == text
    assert '"Infinity"' not in text and "NaN" not in text  # strict JSON


def test_inputs_are_seeded_and_shared():
    art = artifact("rope", head_dim=8, heads=1)
    enc, p = art.encoding, art.params
    digests = []
    for seed in (0, 0, 1):
        report = verdicts.run_parity(art, ["ort-cpu"], seqs=(17,), batches=(3,), seed=seed, keep_outputs=True, properties=False)
        digests.append(dict(report.outputs.digests))
    assert digests[0] == digests[1] and digests[0] != digests[2]
    # The engine's feeds are those the encoding makes from the case's generator: any runtime gets these bytes.
    case = enc.cases(p, (17,), (3,))[0]
    feeds = enc.feeds(p, case, art.options.dtype, np.random.default_rng([0, 0]))
    assert digests[0][("rope-float32", case.label)] == verdicts.feeds_digest(feeds)
    assert np.all(feeds["x"] != 0)


def test_tolerances_follow_the_dtype_bounds_and_can_be_overridden():
    art16 = artifact("rope", dtype="float16", head_dim=8, heads=1)
    feeds = {"position_ids": np.array([[5000]])}
    assert verdicts.bound_for(art16, feeds, None) == 4e-3
    assert verdicts.bound_for(artifact("rope", head_dim=8, heads=1), feeds, None) == pytest.approx(1e-6 * (math.log2(5000) + 1))
    assert verdicts.bound_for(art16, feeds, {"float16": 1e-2}) == 1e-2
    assert verdicts.bound_for(art16, feeds, {"bfloat16": 1e-2}) == 4e-3
    assert verdicts.parse_tolerance("float16=5e-3,bfloat16=4e-2") == {"float16": 5e-3, "bfloat16": 4e-2}
    report = verdicts.run_parity(art16, ["ort-cpu"], seqs=(17,), batches=(1,), tolerance=1e-7, properties=False)
    assert not report.passed
    # The report still says how far off it was: the smallest tolerance that would have passed.
    worst = max(r.comparison.normalised for r in report.results)
    assert 1e-7 < worst <= 4e-3
    again = verdicts.run_parity(art16, ["ort-cpu"], seqs=(17,), batches=(1,), tolerance=worst, properties=False)
    assert again.passed


def test_progress_reaches_its_total():
    calls = []
    verdicts.run_parity(artifact("rope", head_dim=8, heads=1), ["ort-cpu", "reference"], seqs=(1,), batches=(1,),
                      progress=lambda done, total, what: calls.append((done, total)))
    assert calls[-1][0] == calls[-1][1] and [d for d, _ in calls] == list(range(1, len(calls) + 1))


def test_unknown_runtime_is_one_clear_error():
    with pytest.raises(PosexportError, match=r"--runtimes 'tensorrt': unknown runtime \(choose one of torch, reference, ort-cpu"):
        verdicts.run_parity(artifact("rope", head_dim=8, heads=1), ["tensorrt"])


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_every_registered_encoding_goes_through_the_engine(name):
    """Encodings plug in without touching the engine: each one's own sweep and properties, on onnxruntime."""
    art = export.build(name)
    report = verdicts.run_parity(art, ["ort-cpu"], seqs=(1, 17), batches=(1, 3))
    assert report.results and report.passed, reports.verdict_line(report)


# --- the generic property checks, on runners written from the maths (right) and deliberately wrong ----


def sinusoid(positions: np.ndarray, width: int, base: float = 10000.0) -> np.ndarray:
    """Sinusoidal positions (Vaswani et al.), interleaved pairs."""
    i = np.arange(width // 2)
    angles = positions[..., None] / base ** (2 * i / width)
    pe = np.empty(positions.shape + (width,))
    pe[..., 0::2], pe[..., 1::2] = np.sin(angles), np.cos(angles)
    return pe


def additive(pe_of):
    return lambda feeds: (feeds["x"].astype(np.float64) + pe_of(feeds["position_ids"])).astype(np.float32)


def alibi_bias(q_len: int, k_len: int, heads: int, causal: bool = True, distance=lambda d: d) -> np.ndarray:
    """ALiBi biases for a power-of-two head count."""
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    d = (np.arange(k_len - q_len, k_len)[:, None] - np.arange(k_len)[None, :]).astype(np.float64)
    bias = -slopes[:, None, None] * distance(np.abs(d))[None]
    return np.where(d[None] < 0, -np.inf, bias) if causal else bias


def t5_bucket(rp: np.ndarray, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """T5 relative-position buckets, bidirectional."""
    nb = num_buckets // 2
    bucket = nb * (rp > 0)
    n = np.abs(rp)
    max_exact = nb // 2
    large = max_exact + (np.log(np.maximum(n, 1) / max_exact) / np.log(max_distance / max_exact) * (nb - max_exact)).astype(np.int64)
    return bucket + np.where(n < max_exact, n, np.minimum(large, nb - 1))


def biased(bias_of):
    def run(feeds):
        s = feeds["scores"]
        return (s.astype(np.float64) + bias_of(s.shape[2], s.shape[3])[None]).astype(np.float32)

    return run


WIDTH = 16
ROWS = properties.rows_of_additive(WIDTH)
RIGHT_PE = additive(lambda pos: sinusoid(pos, WIDTH))


def check(prop, runner):
    return prop.check(runner, None, F32, np.random.default_rng(0))


def test_sinusoid_properties_hold_on_right_rows_and_fail_on_wrong_ones():
    assert check(properties.bounded(ROWS, 4096), RIGHT_PE).ok
    assert not check(properties.bounded(ROWS, 4096), additive(lambda pos: 1.5 * sinusoid(pos, WIDTH))).ok
    assert check(properties.unique_rows(ROWS, 2048), RIGHT_PE).ok
    assert not check(properties.unique_rows(ROWS, 2048), additive(lambda pos: sinusoid(pos % 1000, WIDTH))).ok
    assert check(properties.linear_shift(ROWS, WIDTH, 4096), RIGHT_PE).ok
    # Angles quadratic in position: bounded and unique, but no fixed linear map takes p to p + k.
    result = check(properties.linear_shift(ROWS, WIDTH, 4096), additive(lambda pos: sinusoid(pos.astype(np.float64) ** 2 / 50, WIDTH)))
    assert not result.ok and result.error > 1e-3


HEADS = 4


def test_alibi_properties_hold_on_right_biases_and_fail_on_wrong_ones():
    bias = properties.bias_of_additive(HEADS)
    right = biased(lambda q, k: alibi_bias(q, k, HEADS))
    assert check(properties.linear_in_distance(bias, 7, 40), right).ok
    assert check(properties.masked_above_diagonal(bias, 7, 40), right).ok
    assert check(properties.linear_in_distance(properties.bias_of_additive(HEADS), 40, 40, symmetric=True),
                 biased(lambda q, k: alibi_bias(q, k, HEADS, causal=False))).ok
    assert not check(properties.linear_in_distance(bias, 7, 40), biased(lambda q, k: alibi_bias(q, k, HEADS, distance=np.sqrt))).ok
    assert not check(properties.masked_above_diagonal(bias, 7, 40), biased(lambda q, k: alibi_bias(q, k, HEADS, causal=False))).ok


def test_t5_bucket_property_holds_on_right_biases_and_fails_on_wrong_ones():
    table = np.random.default_rng(5).standard_normal((32, HEADS))

    def bias_with(bucket):
        def bias(q_len, k_len):
            rp = np.arange(k_len)[None, :] - np.arange(k_len - q_len, k_len)[:, None]
            return np.moveaxis(table[bucket(rp)], -1, 0)

        return biased(bias)

    prop = properties.monotone_buckets(properties.bias_of_additive(HEADS), 300)
    assert check(prop, bias_with(t5_bucket)).ok
    assert not check(prop, bias_with(lambda rp: np.abs(rp) % 16)).ok  # buckets that wrap around
    # A bias that depends on the absolute position is not relative: caught on the diagonals.
    assert not check(prop, biased(lambda q, k: np.random.default_rng(1).standard_normal((HEADS, q, k)))).ok
