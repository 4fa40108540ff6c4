"""Every registered runtime behind one base class: it reports itself available (or why not), loads a built
graph, and returns the graph's output in its dtype within the dtype's bound on
max|out − ref| / max(1, max|ref|) against the float64 oracle; its bound (timing) run gives the same output. Then what is
particular to ort-cuda (strict, no fallback) and OpenVINO (precision, inlining, its known traps)."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest

from posexport.contract import Case
from posexport.rope.encoding import reference
from posexport.encodings.properties import RAISES_PAST_LIMIT
from posexport.runtimes import RUNTIMES
from posexport.runtimes.openvino import OpenVino, partial_contrib_rotary
from posexport.runtimes.ort_web import OrtWeb, pinned_version

from .conftest import artifact, session
from .harness import normalised_error

CONFORMANCE = [
    ("float32", "script", dict(head_dim=16, heads=2)),
    ("float16", "script", dict(head_dim=16, heads=2, rotary_dim=8, layout="bhsd", pair_layout="interleaved")),
    ("bfloat16", "script", dict(head_dim=16, heads=2)),
]


def available_or_skip(name: str):
    rt = RUNTIMES[name]
    ok, why = rt.available()
    assert isinstance(ok, bool) and isinstance(why, str)
    if not ok:
        assert why, f"{name} is unavailable without saying why"
        pytest.skip(f"{name} unavailable: {why}")
    return rt


@pytest.mark.parametrize("dtype, source, params", CONFORMANCE, ids=[c[0] for c in CONFORMANCE])
@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_runtime_conforms(name, dtype, source, params):
    rt = available_or_skip(name)
    assert rt.name == name and rt.description and isinstance(rt.limitations, dict)
    art = artifact("rope", dtype=dtype, source=source, **params)
    ok, why = rt.supports(art)
    if isinstance(rt, OrtWeb) and not ok:  # onnxruntime-web has no bfloat16; SwiftShader's WebGPU no float16
        assert dtype in why or "shader-f16" in why
        pytest.skip(f"{name} declines {dtype}: {why}")
    assert ok, why
    if isinstance(rt, OrtWeb):  # its note names onnxruntime-web's version, where it runs, and where the nodes ran
        session(art, name)
        assert rt.caveats(art).startswith(f"onnxruntime-web {pinned_version()}, ") and "nodes: " in rt.caveats(art)
        assert "adapter " in rt.caveats(art) if name == "ort-webgpu" else "WebAssembly provider (SIMD, " in rt.caveats(art)
    else:
        assert rt.caveats(art) == ""  # a float32 graph of standard ops: nothing computed differently
    p = art.params
    for case in (Case("decode", {"batch": 3, "seq": 1}, start=5000), Case("offsets", {"batch": 3, "seq": 33}, start=100_000, ragged=True)):
        feeds = art.encoding.feeds(p, case, art.options.dtype, np.random.default_rng(3))
        out = session(art, name).run(feeds)
        assert isinstance(out, np.ndarray) and out.dtype == art.options.dtype.numpy
        ref = reference(p, feeds)
        assert out.shape == ref.shape
        err = normalised_error(out, ref)
        assert err <= art.options.dtype.bound(int(feeds["position_ids"].max())), f"{name} {dtype} {case.label}: {err:.2e}"
        bound = session(art, name).bind(feeds)
        bound()
        (first,) = bound.outputs()[:1]
        assert first.shape == out.shape and np.array_equal(np.asarray(first).view(np.uint8), out.view(np.uint8))


def test_ort_cuda_is_strict_or_says_why_not():
    import onnxruntime as ort

    from posexport.runtimes.ort_cuda import STRICT

    rt = RUNTIMES["ort-cuda"]
    ok, why = rt.available()
    assert STRICT == {"session.disable_cpu_ep_fallback": "1"}
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert ok
        art = artifact("rope", head_dim=16, heads=2)
        assert session(art, "ort-cuda").session.get_providers()[0] == "CUDAExecutionProvider"
    else:
        assert not ok and "onnxruntime-gpu" in why and "CUDAExecutionProvider" in why


def test_openvino_compiles_in_float32_with_functions_inlined():
    available_or_skip("openvino")
    art = artifact("rope", head_dim=16, heads=2)
    assert art.model.functions  # the graph calls model-local functions; OpenVINO gets them inlined
    s = session(art, "openvino")
    assert "f32" in str(s.compiled.get_property("INFERENCE_PRECISION_HINT")) or "float32" in str(s.compiled.get_property("INFERENCE_PRECISION_HINT"))


def test_openvino_gather_past_the_limit_is_a_declared_limitation(rng):
    """Documents OpenVINO's behaviour on the rope graphs' guard: onnxruntime raises for a position past
    the graph's limit, OpenVINO returns zero rows without an error. Parity reports it (as a known
    limitation of openvino) instead of hiding it."""
    available_or_skip("openvino")
    art = artifact("rope", head_dim=16, heads=2)
    limit = art.params.position_limit
    x = rng.standard_normal((1, 2, 2, 16)).astype(np.float32)
    positions = np.array([[limit - 1, limit]])
    with pytest.raises(Exception, match=r"(?i)out of|bounds"):
        session(art, "ort-cpu").run({"x": x, "position_ids": positions})
    try:
        out = session(art, "openvino").run({"x": x, "position_ids": positions})
    except Exception:
        pytest.fail("OpenVINO now raises on an out-of-range Gather: drop its declared limitation")
    good = reference(art.params, {"x": x[:, :1], "position_ids": positions[:, :1]})
    assert normalised_error(out[:, :1], good) <= 1e-4  # the last covered position is still right
    assert np.all(out[:, 1] == 0)  # the uncovered one is silently zero
    assert RAISES_PAST_LIMIT in RUNTIMES["openvino"].limitations
    assert "zeros" in RUNTIMES["openvino"].description


def test_openvino_partial_rotary_detection():
    from .test_parity_faults import contrib_graph, partial_contrib_graph

    assert partial_contrib_rotary(partial_contrib_graph().model) is not None
    full = contrib_graph(artifact("rope", head_dim=32, heads=2, position_limit=8192, max_positions=512).params)
    assert partial_contrib_rotary(full) is None  # rotary_embedding_dim == head size: runs correctly
    assert partial_contrib_rotary(artifact("rope", head_dim=16, heads=2).model) is None
    assert OpenVino(run_partial_contrib_rotary=True).supports(partial_contrib_graph()) == (True, "")
    # A 4-D input (the op's [batch, heads, seq, head_dim] form) is caught from its last axis, the head size.
    four_d = copy.deepcopy(partial_contrib_graph().model)
    four_d.graph.node[0].op_type = "Identity"
    del four_d.graph.node[0].input[1:]
    for attr in four_d.graph.node[1].attribute:
        if attr.name == "num_heads":
            four_d.graph.node[1].attribute.remove(attr)
    four_d = onnx.shape_inference.infer_shapes(four_d)
    assert "rotary_embedding_dim=16 < head size 32" in partial_contrib_rotary(four_d)


def test_reference_evaluator_declines_contrib_ops():
    from .test_parity_faults import partial_contrib_graph

    ok, why = RUNTIMES["reference"].supports(partial_contrib_graph())
    assert not ok and "com.microsoft" in why


def test_a_runtime_that_cannot_load_a_graph_is_unavailable_not_a_crash():
    from posexport import verdicts

    from .test_parity_faults import as_artifact, contract_graph

    p = artifact("rope", head_dim=16, heads=2).params
    # A node no runtime knows: every runtime that loads ONNX reports it unavailable with the reason.
    model = contract_graph(p, [onnx.helper.make_node("NoSuchOp", ["x", "position_ids"], ["y"], domain="example.nowhere")], [],
                           (onnx.helper.make_opsetid("example.nowhere", 1),))
    art = as_artifact(model, head_dim=16, heads=2)
    report = verdicts.run_parity(art, ["ort-cpu", "openvino", "reference"], seqs=(1,), batches=(1,), properties=False)
    assert set(report.unavailable) >= {"ort-cpu", "openvino"}
    assert all(why.startswith("failed to load the graph") for name, why in report.unavailable.items() if name != "reference")
