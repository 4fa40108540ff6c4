"""swin: the relative index checked against Swin's own construction, both artifacts on onnxruntime and the
ONNX reference evaluator in every dtype, the offset property on runtime outputs, weights and bad
parameters; Swin-V2's continuous table (--table-source mlp) checked against Swinv2SelfAttention's own MLP
over its relative_coords_table, its misreads failing."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from posexport.encodings.swin import bias_table, build_bias, log_spaced_offsets, mlp_weights, relative_index
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


MLP_CONFIG = dict(window_h=4, window_w=4, heads=3, table_source="mlp")
# (window, pretrained window): its own window, a larger and a smaller pretrained one, one token.
CONTINUOUS = [(4, 0), (4, 3), (2, 6), (7, 12), (1, 0)]


def swinv2_bias(window: int, pretrained: int, first, bias, second) -> np.ndarray:
    """[heads, N, N] as Swinv2SelfAttention adds it, its MLP holding these float64 weights: 16·sigmoid of the MLP
    over its own relative_coords_table (float32 coordinates), gathered by its relative_position_index."""
    from transformers import Swinv2Config
    from transformers.models.swinv2.modeling_swinv2 import Swinv2SelfAttention

    heads = second.shape[0]
    attention = Swinv2SelfAttention(Swinv2Config(), heads, heads, window, (pretrained, pretrained)).double().eval()
    attention.continuous_position_bias_mlp.load_state_dict(
        {"0.weight": torch.from_numpy(first), "0.bias": torch.from_numpy(bias), "2.weight": torch.from_numpy(second)})
    with torch.no_grad():
        table = attention.continuous_position_bias_mlp(attention.relative_coords_table.double()).view(-1, heads)
        gathered = table[attention.relative_position_index.view(-1)].view(window**2, window**2, heads)
    return (16 * torch.sigmoid(gathered.permute(2, 0, 1))).numpy()


@pytest.mark.parametrize("window, pretrained", CONTINUOUS)
def test_continuous_bias_is_swinv2s_and_its_misreads_fail(window, pretrained):
    """The seeded MLP's bias against Swinv2SelfAttention's with the same weights (its coordinates are float32:
    bound 1e-5 on values in (0, 16)); the raw MLP output, or offsets normalised by another window, miss it."""
    p = get_encoding("swin").params(**{**MLP_CONFIG, "window_h": window, "window_w": window}, pretrained_window=pretrained, seed=3)
    theirs = swinv2_bias(window, pretrained, *mlp_weights(p))
    assert np.max(np.abs(build_bias(p) - theirs)) < 1e-5
    first, bias, second = mlp_weights(p)
    raw = np.maximum(log_spaced_offsets(window, window, pretrained) @ first.T + bias, 0) @ second.T
    assert np.max(np.abs(np.moveaxis(raw[relative_index(window, window)], -1, 0) - theirs)) > 1.0  # no 16·sigmoid
    if window > 1:
        other = get_encoding("swin").with_params(p, pretrained_window=0 if pretrained else window + 4)
        assert np.max(np.abs(build_bias(other) - theirs)) > 1e-2


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("source", ["script", "torch"])
def test_continuous_bias_parity_and_offset_property(source, runtime):
    art = artifact("swin", source=source, **MLP_CONFIG, pretrained_window=6)
    check_cases_and_properties(art, runtime, {"relative-2d"})


def test_continuous_bias_mlp_from_a_checkpoint(tmp_path):
    """The MLP's tensors under its module name in a safetensors file (float64, as saved) give the table of those
    weights; a second layer of other heads is refused naming its shape."""
    from safetensors.numpy import save_file

    seeded = get_encoding("swin").params(**MLP_CONFIG, seed=4)
    key = "swinv2.encoder.layers.0.blocks.0.attention.self.continuous_position_bias_mlp"
    tensors = dict(zip(("0.weight", "0.bias", "2.weight"), mlp_weights(seeded)))
    save_file({f"{key}.{name}": value for name, value in tensors.items()}, str(tmp_path / "mlp.safetensors"))
    p = get_encoding("swin").params(**MLP_CONFIG, weights=str(tmp_path / "mlp.safetensors"), key=key)
    np.testing.assert_array_equal(bias_table(p), bias_table(seeded))
    with pytest.raises(PosexportError) as info:
        get_encoding("swin").params(**{**MLP_CONFIG, "heads": 2}, weights=str(tmp_path / "mlp.safetensors"), key=key)
    assert "2.weight has shape [3, 512], expected [2, 512]" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "values, needle",
    [(dict(table_source="mlps"), "--table-source 'mlps'"), (dict(pretrained_window=1), "--pretrained-window 1"),
     (dict(table_source="table", pretrained_window=8), "only means something with --table-source mlp"),
     (dict(class_token=True), "--class-token True"), (dict(weights="x.safetensors"), "--key None"),
     (dict(weights="x.npy", key="mlp"), "an .npy holds one array")],
)
def test_continuous_bias_bad_parameters_name_themselves(values, needle):
    check_bad_params("swin", {**MLP_CONFIG, **values}, needle)
