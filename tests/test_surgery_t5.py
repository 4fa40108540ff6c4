"""`posexport patch` on T5 exports (TorchScript exporter): the per-call bucket computation of the relative
attention bias replaced by posexport's lookup by clamped distance. The bias tensor and the whole model's
outputs are bit-identical to the original's at every length tried (past 2·max_distance too), and the bias
equals transformers' own buckets applied to the trained table; a graph whose buckets are not T5's is
refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

from posexport import surgery
from posexport.errors import PosexportError

from . import learned_fixtures as lf
from . import surgery_fixtures as sf

pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")


def models() -> dict[str, Path]:
    return {"encoder": sf.t5_encoder_export(), "seq2seq": lf.t5_seq2seq()}


def patched(name: str) -> Path:
    out = sf.ROOT / f"t5-{name}-patched.onnx"
    if not out.is_file():
        surgery.patch_file(models()[name], out)
    return out


def bias_names(original: Path) -> list[str]:
    """The T5 biases [1, heads, q, k] of the original model (names the patch keeps)."""
    return [site.tensors["tail"][1].output[0] for site in surgery.find(original) if site.kind == "t5-bias"]


def with_bias_outputs(path: Path, names: list[str]) -> onnx.ModelProto:
    model = onnx.load(str(path))
    model.graph.output.extend(oh.make_empty_tensor_value_info(n) for n in names)
    return model


def feeds(name: str, length: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {"input_ids": rng.integers(0, sf.VOCAB, (2, length)), "attention_mask": np.ones((2, length), dtype=np.int64)}
    if name == "seq2seq":
        out["decoder_input_ids"] = rng.integers(0, sf.VOCAB, (2, length // 2 + 1))
    return out


def run(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


@pytest.mark.parametrize("name", ["encoder", "seq2seq"])
def test_bias_and_outputs_are_bit_identical_at_every_length(name):
    names = bias_names(models()[name])
    before, after = with_bias_outputs(models()[name], names), with_bias_outputs(patched(name), names)
    assert len(names) == (1 if name == "encoder" else 2)
    assert {o for n in after.graph.node if n.op_type.startswith("T5PositionBias") for o in n.output} == set(names)
    assert not any(n.op_type in ("Log", "Abs") for n in after.graph.node)
    for seed, length in enumerate((1, 7, 130, 300)):  # max_distance 128 / 64: the last lengths reach past it
        old, new = run(before, feeds(name, length, seed)), run(after, feeds(name, length, seed))
        for a, b in zip(old, new):
            assert a.shape == b.shape and np.array_equal(a, b)


def test_the_bias_is_transformers_buckets_on_the_trained_table():
    from transformers.models.t5.modeling_t5 import T5Attention
    import torch

    original = onnx.load(str(sf.t5_encoder_export()))
    table = onh.to_array(next(t for t in original.graph.initializer if "relative_attention_bias" in t.name))
    model = with_bias_outputs(patched("encoder"), bias_names(sf.t5_encoder_export()))
    length = 300
    bias = run(model, feeds("encoder", length, 0))[1]
    rp = torch.arange(length)[None, :] - torch.arange(length)[:, None]
    buckets = T5Attention._relative_position_bucket(rp, bidirectional=True, num_buckets=32, max_distance=128).numpy()
    assert np.array_equal(bias[0], np.moveaxis(table[buckets], -1, 0))


def test_buckets_that_are_not_t5s_are_refused(tmp_path):
    model = onnx.load(str(sf.t5_encoder_export()))
    exact = next(n for n in model.graph.node if n.op_type == "Less" and "SelfAttention" in n.name)
    limit = next(n for n in model.graph.node if n.output[0] == exact.input[1])
    assert onh.to_array(limit.attribute[0].t) == 8  # max_exact = num_buckets / 4
    surgery.patch(model)  # as exported: patched
    limit.attribute[0].t.CopyFrom(onh.from_array(np.array(7, dtype=np.int64)))
    with pytest.raises(PosexportError, match="the graph's buckets differ from T5's .* at 2 relative positions, first -7"):
        surgery.patch(model)
    onnx.save(model, tmp_path / "odd.onnx")
    with pytest.raises(PosexportError):
        surgery.patch_file(tmp_path / "odd.onnx", tmp_path / "out.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.onnx"]


def test_doctor_after_the_patch_sees_posexports_lookup():
    before = surgery.doctor(lf.t5_seq2seq())
    assert [s["recovered"]["bidirectional"] for s in before["sites"]] == [True, False]
    assert all(s["recovered"]["max_distance"] == 64 for s in before["sites"])
    after = surgery.doctor(patched("seq2seq"))
    assert [s["kind"] for s in after["sites"]] == ["posexport", "posexport"] and after["faults"] == 0
    assert {s["recovered"]["function"] for s in after["sites"]} == {"T5PositionBias", "T5PositionBias_1"}
