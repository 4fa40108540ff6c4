"""vit-learned: antialiased bicubic resampling checked against torch's F.interpolate in float64, both
artifacts on onnxruntime and the ONNX reference evaluator in every dtype, the trained grid bit-exact,
grids past max_grid raising, weights files and bad parameters."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from posexport import export
from posexport.contract import Case
from posexport.encodings.vit_learned import aa_bicubic_weights, reference, resample_grid, trained_table
from posexport.errors import ParamError, PosexportError
from posexport.registry import get_encoding

from .conftest import artifact, posexport_cli, session
from .harness import normalised_error
from .encoding_checks import check_bad_params, check_every_case

PLAIN = dict(dim=32, trained_h=6, trained_w=5, max_grid=16)
WITH_CLS = dict(dim=24, trained_h=4, trained_w=4, max_grid=12, class_token=True)
DTYPES = ["float32", "float16", "bfloat16"]
SOURCES = ["script", "torch"]
RUNTIMES = ["ort-cpu", "reference"]


def torch_resample(grid: np.ndarray, h: int, w: int, antialias: bool = True) -> np.ndarray:
    """PyTorch's own bicubic resampling of grid [Gh, Gw, dim] to [h, w, dim], float64."""
    t = torch.from_numpy(np.ascontiguousarray(grid.transpose(2, 0, 1)))[None]
    out = F.interpolate(t, size=(h, w), mode="bicubic", align_corners=False, antialias=antialias)
    return out[0].numpy().transpose(1, 2, 0)


# (Gh, Gw) -> (H, W): down, up, mixed, identity, non-square, 1×N.
RESAMPLES = [((14, 14), (7, 9)), ((14, 14), (32, 20)), ((6, 5), (6, 5)), ((14, 10), (1, 3)), ((6, 6), (13, 4)),
             ((16, 16), (1, 1)), ((14, 14), (15, 13)), ((3, 7), (40, 2)), ((24, 24), (5, 64))]


@pytest.mark.parametrize("trained, target", RESAMPLES)
def test_resampling_equals_torch_interpolate_antialias(trained, target, rng):
    grid = rng.standard_normal((*trained, 3))
    ours, theirs = resample_grid(grid, *target, a=-0.5), torch_resample(grid, *target)
    assert np.max(np.abs(ours - theirs)) < 1e-12


def test_single_column_output_matches_torch_on_the_transposed_grid(rng):
    """torch 2.13's CPU kernel returns copies of the first row when the output is one column wide
    (F.interpolate of a [6, 1] column to [2, 1] gives two equal values); the maths has no such case, and
    torch agrees with it on the transposed grid."""
    grid = rng.standard_normal((14, 10, 3))
    ours = resample_grid(grid, 3, 1, a=-0.5)
    theirs = torch_resample(grid.transpose(1, 0, 2), 1, 3).transpose(1, 0, 2)
    assert np.max(np.abs(ours - theirs)) < 1e-12


def test_upscaling_with_opencv_coefficient_is_plain_keys_cubic_inside(rng):
    """With a = −0.75 and no downscaling, interior outputs (all four taps inside) are torch's plain
    (antialias=False) bicubic; only the edges differ, where antialiasing renormalises instead of clamping."""
    grid = rng.standard_normal((8, 8, 2))
    ours, plain = resample_grid(grid, 20, 20, a=-0.75), torch_resample(grid, 20, 20, antialias=False)
    inner = slice(5, 15)
    assert np.max(np.abs(ours[inner, inner] - plain[inner, inner])) < 1e-12


def test_weights_are_normalised_and_the_trained_size_is_the_identity():
    for n_in, n_out in [(14, 14), (14, 3), (5, 64), (7, 1)]:
        w = aa_bicubic_weights(n_in, n_out, -0.5)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.array_equal(aa_bicubic_weights(14, 14, -0.5), np.eye(14))


# torch exports cost seconds each: float16/bfloat16 torch artifacts run in the slow (CI) sweep.
BUILDS = [(d, "script") for d in DTYPES] + [("float32", "torch")] + [pytest.param(d, "torch", marks=pytest.mark.slow) for d in DTYPES[1:]]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype, source", BUILDS)
def test_parity_every_grid(dtype, source, runtime):
    art = artifact("vit-learned", dtype=dtype, source=source, **PLAIN)
    check_every_case(art, runtime)
    (prop,) = art.encoding.properties(art.params)
    result = prop.check(session(art, runtime).run, art.params, art.options.dtype, np.random.default_rng(7))
    assert result.ok, result.detail


@pytest.mark.parametrize("source", SOURCES)
def test_class_token_gives_the_token_sequence(source):
    art = artifact("vit-learned", source=source, **WITH_CLS)
    assert [s.name for s in art.encoding.inputs(art.params)] == ["x", "cls"]
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in art.model.graph.output}
    assert dims == {"y": ["batch", "tokens", 24]}
    for runtime in RUNTIMES:
        check_every_case(art, runtime)
        (prop,) = art.encoding.properties(art.params)
        assert prop.check(session(art, runtime).run, art.params, art.options.dtype, np.random.default_rng(3)).ok


def test_class_row_is_never_resampled(rng):
    p = get_encoding("vit-learned").params(**WITH_CLS)
    feeds = {"x": rng.standard_normal((2, 9, 3, 24)), "cls": rng.standard_normal((2, 1, 24))}
    y = reference(p, feeds)
    np.testing.assert_array_equal(y[:, :1], feeds["cls"] + trained_table(p)[None, :1])
    assert y.shape == (2, 1 + 27, 24)


@pytest.mark.parametrize("runtime", ["ort-cpu", "reference", "torch"])
@pytest.mark.parametrize("source", SOURCES)
def test_grid_past_max_grid_raises(source, runtime, rng):
    art = artifact("vit-learned", source=source, **PLAIN)
    ok = session(art, runtime).run({"x": rng.standard_normal((1, 16, 16, 32)).astype(np.float32)})
    assert ok.shape == (1, 16, 16, 32)
    for h, w in ((17, 3), (3, 17)):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": rng.standard_normal((1, h, w, 32)).astype(np.float32)})


def test_weights_files_load_in_every_layout(tmp_path, rng):
    from safetensors.numpy import save_file

    table = rng.standard_normal((1, 1 + 4 * 4, 24))
    np.save(tmp_path / "pos.npy", table)
    save_file({"pos_embed": table.astype(np.float32), "other": np.zeros(3, np.float32)}, str(tmp_path / "model.safetensors"))
    torch.save({"pos_embed": torch.from_numpy(table), "head.weight": torch.zeros(2)}, tmp_path / "model.pt")
    enc = get_encoding("vit-learned")
    for path, key, exact in (("pos.npy", None, True), ("model.safetensors", "pos_embed", False), ("model.pt", "pos_embed", False)):
        p = enc.params(**WITH_CLS, weights=str(tmp_path / path), key=key)
        got = trained_table(p)
        assert got.shape == (17, 24)
        assert np.array_equal(got, table[0]) if exact else np.max(np.abs(got - table[0])) < 1e-6
        assert p.weights_sha256 == hashlib.sha256((tmp_path / path).read_bytes()).hexdigest()


def test_build_with_weights_is_deterministic_and_checks_the_file(tmp_path, rng):
    path = tmp_path / "pos.npy"
    np.save(path, rng.standard_normal((6 * 5, 32)))
    a = export.build("vit-learned", {**PLAIN, "weights": str(path)})
    b = export.build("vit-learned", {**PLAIN, "weights": str(path)})
    assert a.model_bytes == b.model_bytes and a.manifest == b.manifest
    assert a.manifest["params"]["weights_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    onnx_path, _ = export.save(a, tmp_path / "out")
    assert export.load(onnx_path).params == a.params
    np.save(path, rng.standard_normal((6 * 5, 32)))
    with pytest.raises(PosexportError, match=r"--weights .*changed since the build"):
        export.load(onnx_path)


@pytest.mark.parametrize(
    "values, needle",
    [
        (dict(dim=0), "--dim 0"),
        (dict(trained_h=0), "--trained-h 0"),
        (dict(trained_h=20, max_grid=16), "--max-grid 16"),
        (dict(cubic_coefficient=0.5), "--cubic-coefficient 0.5"),
        (dict(key="pos_embed"), "--key 'pos_embed'"),
        (dict(weights="/nonexistent/pos.npy"), "--weights '/nonexistent/pos.npy': no such file"),
    ],
)
def test_bad_parameters_name_themselves(values, needle):
    check_bad_params("vit-learned", values, needle)


@pytest.mark.parametrize("shape", [(1, 30, 32), (30, 32), (6, 5, 16), (5, 6, 32)])
def test_weights_of_the_wrong_shape_name_weights_and_the_grid(tmp_path, rng, shape):
    path = tmp_path / "pos.npy"
    np.save(path, rng.standard_normal(shape))
    with pytest.raises(ParamError) as info:
        get_encoding("vit-learned").params(**{**PLAIN, "class_token": True, "weights": str(path)})
    message = str(info.value)
    assert message.startswith(f"--weights '{path}'") and f"{list(shape)}" in message and "--trained-h 6" in message


def test_cli_build_with_weights(tmp_path, rng):
    np.save(tmp_path / "pos.npy", rng.standard_normal((1, 1 + 6 * 5, 32)))
    args = ["build", "--encoding", "vit-learned", "--dim", "32", "--trained-h", "6", "--trained-w", "5", "--class-token",
            "true", "--weights", str(tmp_path / "pos.npy"), "--dtype", "float16", "--out", str(tmp_path / "out")]
    posexport_cli(*args, check=True)
    manifest = json.loads((tmp_path / "out" / "vit-learned.json").read_text())
    assert manifest["params"]["weights_sha256"] == hashlib.sha256((tmp_path / "pos.npy").read_bytes()).hexdigest()
    assert [i["name"] for i in manifest["inputs"]] == ["x", "cls"]
    assert manifest["outputs"] == [{"name": "y", "dims": ["batch", "tokens", 32], "dtype": "float16"}]
    art = export.load(tmp_path / "out" / "vit-learned.onnx")
    feeds = art.encoding.feeds(art.params, Case("t", {"batch": 2, "grid_h": 9, "grid_w": 4}), art.options.dtype, rng)
    out = session(art, "ort-cpu").run(feeds)
    assert normalised_error(out, reference(art.params, feeds)) <= art.options.dtype.bound()
