"""What --from-model needed from the encodings: vit-learned's plain (not antialiased) bicubic, its bilinear
resampling (Qwen3-VL's pos_embed), antialiased (SigLIP-2's NaFlex) or not, and DeiT's distillation token,
learned's row offset (OPT)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posexport import export, verdicts
from posexport.encodings.vit_learned import resample_grid
from posexport.errors import ParamError
from posexport.registry import get_encoding

from .conftest import normalised_error, session


@pytest.mark.parametrize("target", [(7, 11), (3, 5), (1, 1), (20, 2)])
def test_plain_bicubic_is_torch_interpolate_without_antialias(rng, target):
    grid = rng.standard_normal((4, 6, 3))
    ours = resample_grid(grid, *target, a=-0.75, antialias=False)
    theirs = torch.nn.functional.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], size=target, mode="bicubic",
                                             align_corners=False)[0].permute(1, 2, 0).numpy()
    assert np.max(np.abs(ours - theirs)) < 1e-12


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("target", [(7, 11), (3, 5), (1, 1), (20, 2), (6, 6)])
def test_bilinear_is_transformers_vision_interpolation(rng, target, align_corners):
    """The float64 bilinear weights against transformers' own get_vision_interpolation_indices_and_weights
    (what Qwen3-VL's tower sums its pos_embed rows with) and torch's F.interpolate."""
    from transformers.vision_utils import get_vision_interpolation_indices_and_weights

    grid = rng.standard_normal((6, 6, 3))
    ours = resample_grid(grid, *target, a=-0.75, antialias=False, interpolation="bilinear", align_corners=align_corners)
    indices, weights = get_vision_interpolation_indices_and_weights(torch.tensor([[1, *target]]), 6, mode="bilinear",
                                                                    align_corners=align_corners)
    theirs = (grid.reshape(36, 3)[indices.numpy()] * weights.double().numpy()[:, :, None]).sum(1).reshape(*target, 3)
    assert np.max(np.abs(ours - theirs)) < 1e-6  # transformers forms the sample points in float32
    interpolated = torch.nn.functional.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], size=target,
                                                   mode="bilinear", align_corners=align_corners)[0].permute(1, 2, 0).numpy()
    assert np.max(np.abs(ours - interpolated)) < 1e-12


# (Gh, Gw) -> (H, W): shrinking, growing, mixed, identity, to one pixel, non-square both ways.
AA_BILINEAR = [((16, 16), (7, 9)), ((6, 6), (20, 13)), ((16, 16), (3, 40)), ((6, 5), (6, 5)), ((16, 16), (1, 1)),
               ((14, 10), (1, 3)), ((3, 7), (40, 2))]


@pytest.mark.parametrize("trained, target", AA_BILINEAR)
def test_antialiased_bilinear_is_torch_interpolate_with_antialias(rng, trained, target):
    """The float64 weights against F.interpolate(mode="bilinear", antialias=True) in float64; plain bilinear
    misses it wherever an axis shrinks."""
    grid = rng.standard_normal((*trained, 3))
    ours = resample_grid(grid, *target, a=-0.5, interpolation="bilinear")
    theirs = torch.nn.functional.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], size=target, mode="bilinear",
                                             align_corners=False, antialias=True)[0].permute(1, 2, 0).numpy()
    assert np.max(np.abs(ours - theirs)) < 1e-12
    plain = resample_grid(grid, *target, a=-0.5, antialias=False, interpolation="bilinear")
    shrinks = target[0] < trained[0] or target[1] < trained[1]
    assert np.max(np.abs(plain - theirs)) > 0.1 if shrinks else np.max(np.abs(plain - theirs)) < 1e-12


@pytest.mark.parametrize("antialias", [False, True])
def test_bilinear_graph_on_every_runtime(antialias):
    """Both bilinear forms through both artifacts on every runtime with the trained-grid property
    (antialiased with a 9 × 9 trained grid, so that grids of the sweep shrink it)."""
    values = {"dim": 8, "trained_h": 9 if antialias else 4, "trained_w": 9 if antialias else 4, "max_grid": 11,
              "antialias": antialias, "interpolation": "bilinear", "align_corners": not antialias}
    for source in ("script", "torch"):
        report = verdicts.run_parity(export.build("vit-learned", values, source=source), ["ort-cpu", "reference", "torch"],
                                     properties=True)
        assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]


def test_a_plain_bilinear_graph_misses_the_antialiased_reference_where_the_grid_shrinks(rng):
    values = {"dim": 8, "trained_h": 9, "trained_w": 9, "max_grid": 11, "interpolation": "bilinear"}
    encoding, plain = get_encoding("vit-learned"), export.build("vit-learned", {**values, "antialias": False})
    for grid, misses in (((4, 6), True), ((11, 10), False)):
        feeds = {"x": rng.standard_normal((2, *grid, 8)).astype(np.float32)}
        out = session(plain, "ort-cpu").run(feeds)
        error = normalised_error(out, encoding.reference(encoding.params(**values), feeds))
        assert error > 1000 * plain.options.dtype.bound() if misses else error < plain.options.dtype.bound(), (grid, error)


@pytest.mark.parametrize("values, option", [({"align_corners": True, "antialias": False}, "--align-corners"),
                                            ({"interpolation": "bilinear", "align_corners": True}, "--align-corners"),
                                            ({"interpolation": "nearest", "antialias": False}, "--interpolation")])
def test_bilinear_options_refused_where_they_mean_nothing(values, option):
    with pytest.raises(ParamError, match=option):
        get_encoding("vit-learned").params(**values)


def test_distillation_token_graph_on_every_runtime():
    values = {"dim": 8, "trained_h": 3, "trained_w": 3, "class_token": True, "distillation_token": True, "max_grid": 8,
              "antialias": False, "cubic_coefficient": -0.75}
    art = export.build("vit-learned", values)
    assert [s.dims for s in art.encoding.inputs(art.params)][1] == ("batch", 2, 8)
    report = verdicts.run_parity(art, ["ort-cpu", "reference", "torch"], properties=True)
    assert report.passed, [(r.case, r.runtime, r.message) for r in report.failures()]


def test_distillation_token_needs_a_class_token():
    with pytest.raises(ParamError, match="--distillation-token"):
        get_encoding("vit-learned").params(distillation_token=True)


def test_row_offset_leaves_the_first_rows_out(tmp_path, rng):
    table = rng.standard_normal((10, 4))
    np.save(tmp_path / "t.npy", table)
    learned = get_encoding("learned")
    p = learned.params(weights=str(tmp_path / "t.npy"), row_offset=2)
    assert (p.max_positions, p.d_model) == (8, 4)
    x = np.zeros((1, 3, 4), dtype=np.float32)
    y = learned.reference(p, {"x": x, "position_ids": np.array([[0, 1, 7]])})
    np.testing.assert_array_equal(y[0], table[[2, 3, 9]])
    with pytest.raises(ParamError, match="--row-offset"):
        learned.params(row_offset=1)
