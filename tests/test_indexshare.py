"""IndexShare attention blocks (one cos/sin gather, rotation inside GroupQueryAttention) and their unfused
baseline, on onnxruntime CPU, against an unfused float64 reference: rotate q and k, then causal attention."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from posexport import export, indexshare
from posexport.errors import ParamError

from .conftest import posexport_cli
from .harness import normalised_error

# (batch, seq, past, start): a prompt, decode steps, a chunk after a past (batch 1: onnxruntime's limit),
# and positions far past the fine table (start shifts position_ids away from the key numbers).
CASES = [(2, 7, 0, 0), (3, 1, 9, 0), (1, 4, 5, 0), (2, 1, 30, 100_000)]


@functools.lru_cache(maxsize=None)
def block(fused: bool, pair_layout: str = "half", dtype: str = "float32"):
    return indexshare.build_block(dict(head_dim=16, heads=4, pair_layout=pair_layout, base=500000.0),
                                  layers=2, kv_heads=2, fused=fused, dtype=dtype)


@functools.lru_cache(maxsize=None)
def ort_session(fused: bool, pair_layout: str = "half", dtype: str = "float32"):
    import onnxruntime as ort

    return ort.InferenceSession(block(fused, pair_layout, dtype).model_bytes, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("pair_layout", ["half", "interleaved"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_block_matches_rotation_then_attention(fused, pair_layout, dtype):
    blk, sess = block(fused, pair_layout, dtype), ort_session(fused, pair_layout, dtype)
    for index, (batch, seq, past, start) in enumerate(CASES):
        feeds = indexshare.feeds(blk, batch, seq, past, np.random.default_rng(index), start)
        assert all(np.all(v != 0) for k, v in feeds.items() if k != "position_ids")
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        ref = indexshare.reference(blk, feeds)
        bound = blk.dtype.bound(int(feeds["position_ids"].max()))
        for name, expected in ref.items():
            assert outs[name].shape == expected.shape, name
            err = normalised_error(outs[name], expected)
            assert err <= bound, f"{name}, case {index}: error {err:.2e} > {bound:.1e}"


def test_fused_block_gathers_once_and_rotates_inside_attention():
    blk = indexshare.build_block(dict(head_dim=16, heads=4), layers=3, kv_heads=1)
    ops = [(n.domain, n.op_type) for n in blk.model.graph.node]
    assert ops.count(("posexport", "TwoLevelCosSin")) == 1
    attention = [n for n in blk.model.graph.node if n.op_type == "GroupQueryAttention"]
    assert len(attention) == 3
    assert all({a.name: a.i for a in n.attribute}["do_rotary"] == 1 for n in attention)
    assert ("com.microsoft", "RotaryEmbedding") not in ops
    assert len({tuple(n.input[7:10]) for n in attention}) == 1  # every layer reads the same cos/sin rows


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        (dict(params=dict(head_dim=16, heads=4, rotary_dim=8)), "--rotary-dim 8"),
        (dict(params=dict(head_dim=16, heads=4), kv_heads=3), "--kv-heads 3"),
        (dict(params=dict(head_dim=16, heads=4), layers=0), "--layers 0"),
        (dict(params=dict(head_dim=16, heads=4), dtype="bfloat16"), "--dtype"),
    ],
)
def test_bad_block_parameters_name_themselves(kwargs, needle):
    with pytest.raises(ParamError, match=needle):
        indexshare.build_block(**kwargs)


def test_block_builds_are_deterministic(tmp_path):
    first, second = (indexshare.build_block(dict(head_dim=16, heads=4), layers=2, kv_heads=2) for _ in range(2))
    assert first.model_bytes == second.model_bytes and first.manifest == second.manifest
    onnx_path, json_path = export.save(first, tmp_path)
    assert onnx_path.read_bytes() == first.model_bytes
    assert json.loads(json_path.read_text())["bytes"] == len(first.model_bytes)


def test_cli_builds_the_block(tmp_path):
    posexport_cli("build", "--indexshare", "--layers", "2", "--heads", "4", "--head-dim", "16", "--kv-heads", "2",
                  "--unfused", "--out", str(tmp_path), check=True)
    manifest = json.loads((tmp_path / "rope_indexshare_unfused.json").read_text())
    assert manifest["kind"] == "indexshare-unfused" and manifest["layers"] == 2 and manifest["kv_heads"] == 2
    assert manifest["bytes"] == len((tmp_path / "rope_indexshare_unfused.onnx").read_bytes())
