"""--output bias for alibi, t5 and swin: only the additive bias [1, heads, q_len, k_len] (swin: [1, heads,
N, N]), broadcast over batch, in the form attention operators take. Shapes, parity on every runtime, both
sources and three dtypes through the parity engine, the once-per-step structure (no [heads, k, k]
intermediate at decode), and the documented example feeding ONNX Attention."""

from __future__ import annotations


import numpy as np
import onnx
import pytest

from posexport import verdicts
from posexport.contract import Case

from .conftest import artifact, session

RUNTIMES = ["ort-cpu", "ort-cpu-noopt", "reference", "torch"]
BIASES = {"alibi": dict(heads=3), "alibi-symmetric": dict(heads=3, causal=False), "t5": dict(heads=3, max_distance=32),
          "t5-causal": dict(heads=3, max_distance=32, bidirectional=False)}


def encoding_of(name: str) -> str:
    return name.split("-")[0]


@pytest.mark.parametrize("source", ["script", "torch"])
@pytest.mark.parametrize("name", list(BIASES))
def test_bias_graph_contract(name, source):
    art = artifact(encoding_of(name), source=source, output="bias", **BIASES[name])
    g = art.model.graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in [*g.input, *g.output]}
    assert dims == {"q_positions": ["q_len"], "k_positions": ["k_len"], "bias": [1, 3, "q_len", "k_len"]}
    feeds = art.encoding.feeds(art.params, Case("chunk", {"batch": 1, "q_len": 5, "k_len": 12}), art.options.dtype, np.random.default_rng(0))
    assert session(art, "ort-cpu").run(feeds).shape == (1, 3, 5, 12)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("source", ["script", "torch"])
@pytest.mark.parametrize("name", ["alibi", "t5-causal"])
def test_bias_passes_the_parity_engine(name, source, dtype):
    art = artifact(encoding_of(name), dtype=dtype, source=source, output="bias", **BIASES[name])
    report = verdicts.run_parity(art, RUNTIMES, seqs=(1, 17))
    assert report.passed, [(r.case, r.runtime, r.status) for r in report.results if r.status != "pass"]


@pytest.mark.parametrize("source", ["script", "torch"])
def test_swin_bias_has_no_input_and_passes_parity(source):
    art = artifact("swin", source=source, output="bias", window_h=3, window_w=4, heads=2)
    assert not art.model.graph.input and [d.dim_value for d in art.model.graph.output[0].type.tensor_type.shape.dim] == [1, 2, 12, 12]
    report = verdicts.run_parity(art, RUNTIMES)
    assert report.passed, [(r.case, r.runtime, r.status) for r in report.results if r.status != "pass"]


def intermediate_sizes(art, q_len: int, k_len: int) -> list[int]:
    """Element counts of every value in the inlined graph, shapes inferred for these lengths."""
    model = onnx.inliner.inline_local_functions(art.model)
    for value in model.graph.input:
        (dim,) = value.type.tensor_type.shape.dim
        dim.dim_value = q_len if value.name == "q_positions" else k_len
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    sizes = []
    for value in inferred.graph.value_info:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        assert all(dims), f"{value.name}: shape not inferred ({dims})"
        sizes.append(int(np.prod(dims)))
    return sizes


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_decode_step_makes_no_k_by_k_intermediate(name):
    """One query against 4096 keys: nothing larger than the bias row itself is made."""
    heads, k_len = 3, 4096
    sizes = intermediate_sizes(artifact(name, output="bias", **BIASES[name]), 1, k_len)
    assert max(sizes) <= heads * k_len < k_len * k_len

