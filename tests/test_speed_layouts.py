"""The packed layout (bsh: x [batch, seq, heads·head_dim]) and the decode-step lookup: the contract's
shapes, parity on every backend and scaling source through the parity engine, graph structure (the fused
op writes y itself; no Reshape does), and positions past the limit still raise."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from posexport import verdicts
from posexport.contract import Case

from .conftest import artifact, session
from .harness import normalised_error

OPSET = {"portable": 18, "onnx23": 23, "ort": 18}
SMALL = dict(head_dim=16, heads=3, layout="bsh")


def inlined_nodes(art) -> list[str]:
    """Op types of the graph's functions, entry first (what onnxruntime inlines), but the position_ids
    shape check (its Reshape of position_ids is no copy of x)."""
    return [n.op_type for f in art.model.functions if f.name != "CheckPositionIds" for n in f.node if n.op_type != "Constant"]


@pytest.mark.parametrize("source", ["script", "torch"])
def test_bsh_graph_contract(source):
    art = artifact("rope", source=source, **SMALL)
    g = art.model.graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*g.input, *g.output]}
    assert dims == {"x": ["batch", "seq", 48], "position_ids": ["batch", "seq"], "y": ["batch", "seq", 48]}


@pytest.mark.parametrize("backend", list(OPSET))
def test_bsh_passes_the_parity_engine(backend):
    art = artifact("rope", backend=backend, opset=OPSET[backend], rotary_dim=8, pair_layout="interleaved", **SMALL)
    runtimes = ["ort-cpu", "ort-cpu-noopt"] + (["reference", "torch"] if backend != "ort" else ["torch"])
    report = verdicts.run_parity(art, runtimes, seqs=(1, 17), batches=(1, 3))
    assert report.passed, [(r.case, r.runtime, r.status) for r in report.results if r.status != "pass"]


@pytest.mark.parametrize("scaling", [dict(scaling="longrope", original_max_positions=64, max_positions=2048,
                                          short_factor=(1.0, 1.5, 2.0, 2.5), long_factor=(3.0, 4.0, 5.0, 6.0)),
                                     dict(scaling="dynamic", factor=2.0, max_positions=64),
                                     dict(scaling="yarn", factor=4.0, original_max_positions=64, max_positions=256)])
@pytest.mark.parametrize("source", ["script", "torch"])
def test_bsh_every_cos_sin_source(scaling, source):
    """Tables, stacked regimes and dynamic frequencies all feed the packed rotation, on both sources."""
    art = artifact("rope", source=source, backend="ort" if source == "script" else "portable", head_dim=8, heads=2, layout="bsh", **scaling)
    for index, (batch, seq, start) in enumerate([(2, 9, 0), (1, 1, 300), (3, 5, 1000)]):
        feeds = art.encoding.feeds(art.params, Case("t", {"batch": batch, "seq": seq}, start=start), art.options.dtype, np.random.default_rng(index))
        ref = art.encoding.reference(art.params, feeds)
        out = session(art, "ort-cpu").run(feeds)
        assert out.shape == (batch, seq, 16)
        assert normalised_error(out, ref) <= art.options.dtype.bound(int(feeds["position_ids"].max()))


def test_mrope_takes_the_packed_layout_too():
    """M-RoPE is a rotation of the same kind: bsh reaches it through the kind and the backends."""
    art = artifact("mrope", backend="ort", head_dim=16, heads=2, mrope_section="2,3,3", layout="bsh")
    report = verdicts.run_parity(art, ["ort-cpu", "torch"], seqs=(1, 17))
    assert report.passed, [(r.case, r.runtime, r.status) for r in report.results if r.status != "pass"]


@pytest.mark.parametrize("backend", ["onnx23", "ort"])
def test_fused_bsh_has_no_reshape_of_x(backend):
    """The rotary op reads x and writes y as they are: no Reshape around it (onnxruntime would copy the
    one that writes the graph output)."""
    ops = inlined_nodes(artifact("rope", backend=backend, opset=OPSET[backend], **SMALL))
    rotate = ops.index("RotaryEmbedding")
    assert "Reshape" not in ops[rotate + 1 :]
    assert ops.count("Reshape") == (3 if backend == "ort" else 0)  # ort: the row ids and the two [rows, n] caches


def test_portable_bsh_last_op_is_the_add():
    """Packed portable graphs reshape the two products, not the sum, so the Add writes y."""
    art = artifact("rope", **SMALL)
    rotate = next(f for f in art.model.functions if f.name == "RopeRotatePairs")
    assert rotate.node[-1].op_type == "Add"


def per_call_ops(art, tmp_path) -> list[str]:
    """Op types onnxruntime runs per call, from its own optimised graph (ops on initializers folded)."""
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    ort.InferenceSession(art.model_bytes, so, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]


@pytest.mark.parametrize("backend", ["onnx23", "ort"])
def test_decode_lookup_is_a_few_nodes(backend, tmp_path):
    """Per call, the fixed-table lookup is Less, Where, Div, Mod, two Gathers of packed rows, a Mul, a
    ReduceSum and a Split; the packing of the four tables is folded at load. Beside it run only the
    position_ids shape check, the rotary op and (ort) its row ids: nothing grows with the position or the
    tables (no Slice of a table, no Range over positions)."""
    art = artifact("rope", backend=backend, opset=OPSET[backend], **SMALL)
    ops = per_call_ops(art, tmp_path)
    lookup = ["Less", "Where", "Div", "Mod", "Gather", "Gather", "Mul", "ReduceSum", "Split"]
    rows = ["Shape", "ReduceProd", "Range", "Reshape", "Reshape", "Reshape"] if backend == "ort" else []
    guard = next(f for f in art.model.functions if f.name == "CheckPositionIds")
    checks = [n.op_type for n in guard.node if n.op_type != "Constant"]
    assert sorted(ops) == sorted(lookup + rows + checks + ["RotaryEmbedding"])


@pytest.mark.parametrize("runtime", ["ort-cpu", "reference"])
def test_bsh_positions_outside_the_graph_raise(runtime, rng):
    art = artifact("rope", head_dim=16, heads=2, layout="bsh", max_positions=4096)
    limit = art.params.position_limit
    x = rng.standard_normal((1, 2, 32)).astype(np.float32)
    fine_rows = art.encoding.tables(art.params, art.options).arrays["fine_cos"].shape[0]
    for bad in ([[limit - 1, limit]], [[-1, 0]], [[0, -fine_rows]], [[0, -limit]]):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": x, "position_ids": np.array(bad)})
