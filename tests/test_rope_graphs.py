"""Both rope artifacts (onnxscript function, torch export) on onnxruntime CPU and the ONNX reference
evaluator, against the float64 oracle, in every dtype: max|out − ref| / max(1, max|ref|) within the
dtype's bound (docs/numerics.md)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from posexport import export, verdicts
from posexport.contract import Case
from posexport.rope.encoding import reference

from .conftest import artifact, session
from .harness import normalised_error

CONFIGS = {
    "half-bshd": dict(head_dim=64, heads=4),
    "interleaved-bhsd": dict(head_dim=64, heads=4, pair_layout="interleaved", layout="bhsd"),
    "partial-half-bhsd": dict(head_dim=48, heads=3, rotary_dim=32, layout="bhsd", base=500000.0),
    "partial-interleaved-bshd": dict(head_dim=32, heads=2, rotary_dim=16, pair_layout="interleaved"),
    "partial-half-bsh": dict(head_dim=48, heads=3, rotary_dim=32, layout="bsh"),
}
# (label, batch, seq, start, ragged): the lengths that break deployments.
CASES = [
    ("seq1", 1, 1, 0, False),
    ("seq7-b3-offsets", 3, 7, 1000, True),
    ("seq512", 1, 512, 0, False),
    ("seq512-b3-offsets", 3, 512, 3000, True),
    ("seq4096", 1, 4096, 0, False),
    ("past-cached-rows", 3, 7, 100_000, True),
    ("decode@3000", 3, 1, 3000, False),
]
DTYPES = ["float32", "float16", "bfloat16"]
SOURCES = ["script", "torch"]
RUNTIMES = ["ort-cpu", "reference"]


def check_case(art, runtime: str, batch: int, seq: int, start: int, ragged: bool, seed: int = 0) -> None:
    enc, p = art.encoding, art.params
    feeds = enc.feeds(p, Case("t", {"batch": batch, "seq": seq}, start=start, ragged=ragged), art.options.dtype, np.random.default_rng(seed))
    assert np.all(feeds["x"] != 0)
    ref = reference(p, feeds)
    out = session(art, runtime).run(feeds)
    assert out.dtype == art.options.dtype.numpy and out.shape == ref.shape
    err = normalised_error(out, ref)
    bound = art.options.dtype.bound(int(feeds["position_ids"].max()))
    assert err <= bound, f"{runtime}: error {err:.3e} > bound {bound:.1e}"


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_parity_all_cases(config, dtype, source, runtime):
    art = artifact("rope", dtype=dtype, source=source, **CONFIGS[config])
    for _, batch, seq, start, ragged in CASES:
        check_case(art, runtime, batch, seq, start, ragged)


@pytest.mark.parametrize("source", SOURCES)
def test_graph_contract(source):
    art = artifact("rope", source=source, **CONFIGS["half-bshd"])
    g = art.model.graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*g.input, *g.output]}
    assert dims == {"x": ["batch", "seq", 4, 64], "position_ids": ["batch", "seq"], "y": ["batch", "seq", 4, 64]}
    assert g.input[1].type.tensor_type.elem_type == onnx.TensorProto.INT64


def test_script_graph_calls_a_model_local_posexport_function():
    art = artifact("rope", **CONFIGS["partial-half-bhsd"])
    (node,) = art.model.graph.node
    assert (node.domain, node.op_type) == ("posexport", "Rope")
    assert {f.name for f in art.model.functions} >= {"Rope", "TwoLevelCosSin"}
    assert all(f.domain == "posexport" for f in art.model.functions)
    assert {(i.domain, i.version) for i in art.model.opset_import} >= {("posexport", 1)}


def test_function_can_be_lifted_into_another_graph(rng):
    """A user's graph that calls posexport.Rope with its own tensors gives the same answer."""
    import onnx.helper as oh
    import onnxruntime as ort

    art = artifact("rope", **CONFIGS["half-bshd"])
    tables = [i.name for i in art.model.graph.initializer]
    user_node = oh.make_node("Rope", ["q", "pos", *tables], ["q_rot"], domain="posexport")
    scale = oh.make_node("Mul", ["q_rot", "two"], ["out"])
    graph = oh.make_graph(
        [user_node, scale], "user", [oh.make_tensor_value_info("q", onnx.TensorProto.FLOAT, ["b", "s", 4, 64]),
                                     oh.make_tensor_value_info("pos", onnx.TensorProto.INT64, ["b", "s"])],
        [oh.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)],
        initializer=[*art.model.graph.initializer, onnx.numpy_helper.from_array(np.float32(2.0), "two")],
    )
    user = oh.make_model(graph, functions=art.model.functions, opset_imports=art.model.opset_import, ir_version=10)
    q = rng.standard_normal((2, 6, 4, 64)).astype(np.float32)
    pos = rng.integers(0, 9000, (2, 6))
    (out,) = ort.InferenceSession(user.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"q": q, "pos": pos})
    ref = 2 * reference(art.params, {"x": q, "position_ids": pos})
    assert normalised_error(out, ref) <= 1e-6 * (np.log2(9000) + 1)


@pytest.mark.parametrize("source", SOURCES)
def test_decode_step_matches_the_full_sequence(source, rng):
    """KV-cache decoding is just other position_ids: token 3000 alone equals row 3000 of a long run."""
    art = artifact("rope", source=source, **CONFIGS["interleaved-bhsd"])
    x = rng.standard_normal((1, 4, 3001, 64)).astype(np.float32)
    full = session(art, "ort-cpu").run({"x": x, "position_ids": np.arange(3001)[None]})
    step = session(art, "ort-cpu").run({"x": x[:, :, 3000:], "position_ids": np.array([[3000]])})
    np.testing.assert_allclose(step, full[:, :, 3000:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("runtime", ["ort-cpu", "ort-cpu-noopt", "reference", "torch"])
@pytest.mark.parametrize("source", SOURCES)
def test_positions_outside_the_graph_raise(source, runtime, rng):
    art = artifact("rope", source=source, head_dim=16, heads=2, max_positions=4096)
    limit = art.params.position_limit
    x = rng.standard_normal((1, 2, 2, 16)).astype(np.float32)
    ok = session(art, runtime).run({"x": x, "position_ids": np.array([[limit - 2, limit - 1]])})
    assert normalised_error(ok, reference(art.params, {"x": x, "position_ids": np.array([[limit - 2, limit - 1]])})) < 1e-4
    for bad in ([[limit - 1, limit]], [[-1, 0]], [[0, 10 * limit]]):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": x, "position_ids": np.array(bad)})


def test_max_positions_4096_is_exact_at_100000(rng):
    art = artifact("rope", head_dim=128, heads=2, max_positions=4096)
    check_case(art, "ort-cpu", 2, 33, 100_000, True)
    assert art.manifest["tables"]["fine_cos"][0] < 4096  # the answer came from two-level tables, not a big table


@pytest.mark.parametrize("source, backend, opset, layout, dtype", [
    ("script", "portable", 18, "bshd", "float32"),
    ("torch", "portable", 18, "bhsd", "float16"),
    ("script", "onnx23", 23, "bsh", "bfloat16"),
    ("script", "ort", 18, "bshd", "float32"),
])
def test_deinterleave_reads_pairs_and_writes_them_half_split(source, backend, opset, layout, dtype):
    """DeepSeek-V3's rope_interleave: every backend against the float64 reference, whose output is the
    interleaved rotation with its channels (2i, 2i+1) moved to (i, i + d/2)."""
    values = {"head_dim": 16, "heads": 2, "layout": layout, "pair_layout": "deinterleave", "max_positions": 512,
              "position_limit": 8192}
    art = export.build("rope", values, dtype=dtype, source=source, backend=backend, opset=opset)
    report = verdicts.run_parity(art, None, seqs=(1, 17), batches=(2,), properties=(backend == "portable"))
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]
    rng = np.random.default_rng(0)
    x, positions = rng.standard_normal((1, 5, 2, 16)), np.arange(5)[None] + 300
    p = art.encoding.params(**{**values, "layout": "bshd"})
    interleaved = art.encoding.reference(art.encoding.params(**{**values, "layout": "bshd", "pair_layout": "interleaved"}),
                                         {"x": x, "position_ids": positions})
    ours = art.encoding.reference(p, {"x": x, "position_ids": positions})
    np.testing.assert_allclose(ours, np.concatenate([interleaved[..., 0::2], interleaved[..., 1::2]], axis=-1), atol=1e-12)
