"""Cache sites of the rotary ops an exporter may write directly: com.microsoft.RotaryEmbedding and the
ONNX RotaryEmbedding (opset 23), each reading float32-angle caches of 4096 rows."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort
import pytest

from posexport import surgery
from posexport.rope.encoding import RopeParams, reference

from .harness import normalised_error

ROWS, HEADS, DIM = 4096, 2, 16


def rotary_model(domain: str, dtype: type = np.float32) -> onnx.ModelProto:
    """x [batch, seq, heads·dim] rotated by a RotaryEmbedding reading caches built the usual way: float32
    angles position · inv_freq, then cos and sin (stored as ``dtype``)."""
    inv_freq = 10000.0 ** (-np.arange(0, DIM, 2, dtype=np.float32) / DIM)
    angles = np.arange(ROWS, dtype=np.float32)[:, None] * inv_freq
    caches = [onh.from_array(np.cos(angles).astype(dtype), "cos_cache"), onh.from_array(np.sin(angles).astype(dtype), "sin_cache")]
    if domain:
        node = oh.make_node("RotaryEmbedding", ["x", "position_ids", "cos_cache", "sin_cache"], ["y"], domain=domain,
                            name="rope", interleaved=0, num_heads=HEADS)
        opsets = [oh.make_opsetid("", 18), oh.make_opsetid(domain, 1)]
    else:
        node = oh.make_node("RotaryEmbedding", ["x", "cos_cache", "sin_cache", "position_ids"], ["y"], name="rope",
                            interleaved=0, num_heads=HEADS)
        opsets = [oh.make_opsetid("", 23)]
    graph = oh.make_graph([node], "rotary", [oh.make_tensor_value_info("x", 1, ["batch", "seq", HEADS * DIM]),
                                             oh.make_tensor_value_info("position_ids", 7, ["batch", "seq"])],
                          [oh.make_tensor_value_info("y", 1, ["batch", "seq", HEADS * DIM])], initializer=caches)
    return oh.make_model(graph, opset_imports=opsets, ir_version=10)


def run(model: onnx.ModelProto, start: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(start).standard_normal((1, 5, HEADS * DIM)).astype(np.float32)
    positions = np.arange(start, start + 5)[None]
    (y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "position_ids": positions})
    expected = reference(RopeParams(head_dim=DIM, heads=HEADS), {"x": x.reshape(1, 5, HEADS, DIM), "position_ids": positions})
    return y.reshape(1, 5, HEADS, DIM), expected


@pytest.mark.parametrize("domain", ["com.microsoft", ""])
def test_rotary_embedding_caches_are_diagnosed_and_rebuilt(domain):
    model = rotary_model(domain)
    (site,) = surgery.diagnose(model)["sites"]
    assert site["kind"] == "rope-cache" and site["recovered"]["recognised"] == {"head_dim": 16, "base": 10000.0}
    faults = {f["fault"]: f["value"] for f in site["faults"]}
    assert faults["position-limit"] == ROWS and faults["precision"] > 1e-5  # float32 angles at row 4095
    with pytest.raises(Exception, match="out of range"):
        run(model, 5000)
    fixed = surgery.patch(model, position_limit=8192).model
    assert surgery.diagnose(fixed)["faults"] == 0
    for start in (0, 4090, 5000):
        got, expected = run(fixed, start)
        assert normalised_error(got, expected) <= 2e-6
    assert [n.name for n in fixed.graph.node] == ["rope"]
    again = surgery.patch(fixed, position_limit=8192).model  # patching is idempotent
    assert again.SerializeToString(deterministic=True) == fixed.SerializeToString(deterministic=True)


def test_float16_caches_are_a_fault_and_stay_float16_when_rebuilt():
    model = rotary_model("com.microsoft", np.float16)
    (site,) = surgery.diagnose(model)["sites"]
    assert "float16-cache" in [f["fault"] for f in site["faults"]]
    assert site["recovered"]["recognised"] is None  # float16 rounding hides the exact frequencies
    fixed = surgery.patch(model, {"base": 10000.0}, position_limit=8192).model
    caches = {t.name: onh.to_array(t) for t in fixed.graph.initializer}
    assert caches["cos_cache"].dtype == np.float16 and caches["cos_cache"].shape == (8192, DIM // 2)
