"""swin: the relative index checked against Swin's own construction, both artifacts on onnxruntime and the
ONNX reference evaluator in every dtype, the offset property on runtime outputs, weights and bad
parameters."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from posexport.encodings.swin import bias_table, build_bias, relative_index
from posexport.errors import PosexportError
from posexport.registry import get_encoding

from .conftest import artifact, posexport_cli
from .encoding_checks import check_bad_params, check_cases_and_properties

CONFIG = dict(window_h=4, window_w=3, heads=2)
DTYPES = ["float32", "float16", "bfloat16"]
RUNTIMES = ["ort-cpu", "reference"]
BUILDS = [(d, "script") for d in DTYPES] + [("float32", "torch")] + [pytest.param(d, "torch", marks=pytest.mark.slow) for d in DTYPES[1:]]


def swin_relative_position_index(wh: int, ww: int) -> np.ndarray:
    """The construction in Swin Transformer's WindowAttention: coordinates, pairwise differences, shifted
    to start at 0, rows scaled by 2·Ww − 1."""
    coords = np.stack(np.meshgrid(np.arange(wh), np.arange(ww), indexing="ij")).reshape(2, -1)  # [2, N]
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0).copy()  # [N, N, 2]
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    return rel.sum(-1)


@pytest.mark.parametrize("wh, ww", [(7, 7), (4, 3), (1, 5), (12, 12)])
def test_index_matches_swin(wh, ww):
    assert np.array_equal(relative_index(wh, ww), swin_relative_position_index(wh, ww))


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype, source", BUILDS)
def test_parity_and_offset_property(dtype, source, runtime):
    art = artifact("swin", dtype=dtype, source=source, **CONFIG)
    check_cases_and_properties(art, runtime, {"relative-2d"})


def test_graph_contract_has_a_dynamic_first_axis():
    art = artifact("swin", **CONFIG)
    (x,) = art.model.graph.input
    assert [d.dim_param or d.dim_value for d in x.type.tensor_type.shape.dim] == ["batch_windows", 2, 12, 12]


def test_weights_from_a_state_dict(tmp_path, rng):
    table = rng.standard_normal((7 * 5, 2))
    key = "layers.0.blocks.0.attn.relative_position_bias_table"
    torch.save({key: torch.from_numpy(table), "other": torch.zeros(3)}, tmp_path / "swin.pth")
    p = get_encoding("swin").params(**CONFIG, weights=str(tmp_path / "swin.pth"), key=key)
    np.testing.assert_array_equal(bias_table(p), table.astype(np.float32))
    bias = build_bias(p)
    assert bias.shape == (2, 12, 12)
    assert bias[1, 5, 5] == bias_table(p)[(4 - 1) * 5 + (3 - 1), 1]  # a token with itself: offset (0, 0)


@pytest.mark.parametrize(
    "values, needle",
    [(dict(window_h=0), "--window-h 0"), (dict(window_w=0), "--window-w 0"), (dict(heads=0), "--heads 0"),
     (dict(key="x"), "--key 'x'")],
)
def test_bad_parameters_name_themselves(values, needle):
    check_bad_params("swin", values, needle)


def test_weights_of_the_wrong_shape(tmp_path, rng):
    np.save(tmp_path / "t.npy", rng.standard_normal((49, 2)))
    with pytest.raises(PosexportError) as info:
        get_encoding("swin").params(**CONFIG, weights=str(tmp_path / "t.npy"))
    assert str(info.value).startswith(f"--weights {tmp_path / 't.npy'}") and "[49, 2]" in str(info.value) and "[35, 2]" in str(info.value)


def test_cli_build_with_weights(tmp_path, rng):
    np.save(tmp_path / "t.npy", rng.standard_normal((35, 2)))
    posexport_cli("build", "--encoding", "swin", "--window-h", "4", "--window-w", "3", "--heads", "2", "--weights",
                  str(tmp_path / "t.npy"), "--dtype", "float16", "--out", str(tmp_path), check=True)
    manifest = json.loads((tmp_path / "swin.json").read_text())
    assert manifest["inputs"] == [{"name": "scores", "dims": ["batch_windows", 2, 12, 12], "dtype": "float16"}]
    assert len(manifest["params"]["weights_sha256"]) == 64
