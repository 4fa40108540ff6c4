"""Scaled rope graphs (both artifacts, every backend) against the float64 oracle on onnxruntime CPU and the
ONNX reference evaluator, around each scaling's switch length L0 and for decode steps; dynamic NTK and
longrope decide on max(position_ids) + 1 inside the graph, on every call."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from posexport import export
from posexport.rope.backends import BACKENDS
from posexport.contract import Case
from posexport.rope.encoding import reference
from posexport.verdicts import run_parity
from posexport.runtimes import get_runtime

from .conftest import artifact, session
from .harness import normalised_error

L0 = 64
SHORT = tuple(1.0 + 0.25 * i for i in range(8))
LONG = tuple(1.0 + 3.0 * i for i in range(8))
# Small heads, L0 = 64 so that 4·L0 is cheap; layouts and partial rotary vary across scalings.
SCALED = {
    "linear": dict(head_dim=16, heads=2, scaling="linear", factor=4.0, max_positions=256),
    "ntk": dict(head_dim=16, heads=2, rotary_dim=8, scaling="ntk", factor=4.0, max_positions=L0, pair_layout="interleaved"),
    "dynamic": dict(head_dim=16, heads=2, scaling="dynamic", factor=4.0, max_positions=L0),
    "dynamic-partial": dict(head_dim=24, heads=2, rotary_dim=16, scaling="dynamic", factor=2.0, max_positions=L0,
                            pair_layout="interleaved", layout="bhsd", base=500000.0),
    "yarn": dict(head_dim=32, heads=2, scaling="yarn", factor=4.0, original_max_positions=L0, max_positions=4 * L0,
                 mscale=0.707, mscale_all_dim=1.0, base=1e6, layout="bhsd"),
    "llama3": dict(head_dim=32, heads=2, rotary_dim=24, scaling="llama3", factor=8.0, original_max_positions=L0,
                   max_positions=8 * L0, low_freq_factor=1.0, high_freq_factor=4.0, base=500000.0),
    "longrope": dict(head_dim=16, heads=2, scaling="longrope", original_max_positions=L0, max_positions=32 * L0,
                     short_factor=SHORT, long_factor=LONG),
    "longrope-partial": dict(head_dim=24, heads=2, rotary_dim=16, scaling="longrope", original_max_positions=L0,
                             max_positions=32 * L0, short_factor=SHORT, long_factor=LONG, pair_layout="interleaved"),
}
RUNTIMES = ["ort-cpu", "reference"]
# (batch, seq, largest position, ragged): 17-token chunks and decode steps ending at L0 − 1, L0, L0 + 1
# and 4·L0, a prefill from 0 across L0, and a ragged batch whose longest row alone crosses L0.
WINDOWS = [(b, s, last, False) for last in (L0 - 1, L0, L0 + 1, 4 * L0) for b, s in ((2, 17), (3, 1))]
WINDOWS += [(1, 4 * L0 + 3, 4 * L0 + 2, False), (3, 9, L0 + 5, True)]


def run_case(art, runtime: str, batch: int, seq: int, last: int, ragged: bool, seed: int = 0) -> float:
    p = art.params
    case = Case("t", {"batch": batch, "seq": seq}, start=last - seq + 1, ragged=ragged)
    feeds = art.encoding.feeds(p, case, art.options.dtype, np.random.default_rng(seed))
    if ragged:  # one row reaches `last`, the others stop earlier
        feeds["position_ids"][0] = np.arange(last - seq + 1, last + 1)
    ref = reference(p, feeds)
    out = session(art, runtime).run(feeds)
    err = normalised_error(out, ref)
    bound = art.options.dtype.bound(int(feeds["position_ids"].max()))
    assert err <= bound, f"{runtime} batch {batch} seq {seq} last {last}: error {err:.3e} > bound {bound:.1e}"
    return err


# The torch module differs between scalings only in its cos/sin source: tables (static scalings, whose
# torch path test_rope_graphs covers) or the in-graph decisions of dynamic and longrope. Exports are slow,
# so torch builds cover the run-time decisions and one attention-factor table set.
BUILDS = [(name, "script") for name in SCALED] + [(name, "torch") for name in ("dynamic", "longrope", "yarn")]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name, source", BUILDS)
def test_parity_around_the_switch_length(name, source, runtime):
    art = artifact("rope", source=source, **SCALED[name])
    for window in WINDOWS:
        run_case(art, runtime, *window)


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_half_precision_around_the_switch_length(name):
    art = artifact("rope", dtype="float16", **SCALED[name])
    for window in WINDOWS:
        run_case(art, "ort-cpu", *window)


def backend_artifact(backend: str, name: str) -> export.Artifact:
    """Built at the default opset, or the first one the backend supports."""
    return artifact("rope", backend=backend, opset=max(export.DEFAULT_OPSET, BACKENDS[backend].min_opset), **SCALED[name])


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("name", ["linear", "dynamic-partial", "yarn", "llama3", "longrope-partial"])
def test_every_backend(backend, name):
    art = backend_artifact(backend, name)
    ran = 0
    for runtime in RUNTIMES:
        ok, why = get_runtime(runtime).supports(art)
        if ok:
            ran += 1
            for window in WINDOWS[::3]:
                run_case(art, runtime, *window)
    if not ran:
        pytest.skip(f"no runtime here runs the {backend} backend")


@pytest.mark.parametrize("name", ["linear", "ntk", "dynamic", "yarn", "llama3", "longrope"])
def test_through_the_parity_engine(name):
    art = artifact("rope", **SCALED[name])
    report = run_parity(art, ["ort-cpu", "reference"], seqs=(1, 17), batches=(1, 2))
    assert report.passed, [(r.case, r.runtime, r.status, r.message) for r in report.results if r.status != "pass"]
    labels = {r.case for r in report.results}
    if name not in ("linear", "ntk"):
        assert {"switch@63", "switch@64", "switch@65", "switch@256", "switch-decode@64"} <= labels


@pytest.mark.parametrize("source", ["script", "torch"])
@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_decision_is_made_on_every_call(name, source, rng):
    """Stateless: the same token gives the short answer alone, the long one beside a token past L0, and
    the short one again afterwards. The torch graph was exported at a 5-token example, far below L0."""
    art = artifact("rope", source=source, **SCALED[name])
    run = session(art, "ort-cpu").run
    x = rng.standard_normal((2, 1, 2, 16)).astype(np.float32)
    alone = {"x": x[:1], "position_ids": np.array([[10]])}
    beside = {"x": x, "position_ids": np.array([[10], [4 * L0]])}
    first, together, again = run(alone), run(beside), run(alone)
    np.testing.assert_array_equal(first, again)
    assert normalised_error(first, reference(art.params, alone)) <= 1e-6 * (np.log2(10) + 1)
    assert normalised_error(together, reference(art.params, beside)) <= 1e-6 * (np.log2(4 * L0) + 1)
    assert np.max(np.abs(together[:1] - first)) > 1e-3  # the long regime really changed token 10


@pytest.mark.parametrize("runtime", ["ort-cpu", "reference", "torch"])
@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_positions_outside_the_graph_raise(name, runtime, rng):
    limit = 4096
    art = artifact("rope", position_limit=limit, **SCALED[name])
    x = rng.standard_normal((1, 2, 2, 16)).astype(np.float32)
    ok = {"x": x, "position_ids": np.array([[limit - 2, limit - 1]])}
    assert normalised_error(session(art, runtime).run(ok), reference(art.params, ok)) <= 1e-5
    for bad in ([[limit - 1, limit]], [[-1, 0]], [[0, 10 * limit]]):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": x, "position_ids": np.array(bad)})


def test_dynamic_angles_are_formed_in_float64():
    """Angles are never a float32 product of a large position; the dynamic graph forms angles in double."""
    art = artifact("rope", **SCALED["dynamic"])
    ops = {(n.op_type) for f in art.model.functions for n in f.node}
    assert {"Cos", "Sin", "Pow"} <= ops
    types = {t.name: t.data_type for t in art.model.graph.initializer}
    assert types["inv_freq"] == onnx.TensorProto.DOUBLE and types["ratio_exponent"] == onnx.TensorProto.DOUBLE


def test_longrope_tables_hold_both_regimes():
    art = artifact("rope", **SCALED["longrope"])
    fine, coarse = art.manifest["tables"]["fine_cos"], art.manifest["tables"]["coarse_cos"]
    p = art.params
    assert fine[0] * coarse[0] == 4 * p.position_limit  # two regimes, each (P rows, Q rows) with P·Q = limit
