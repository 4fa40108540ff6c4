"""What --from-model needed from the encodings: vit-learned's plain (not antialiased) bicubic, its bilinear
resampling (Qwen3-VL's pos_embed), antialiased (SigLIP-2's NaFlex) or not, and DeiT's distillation token,
learned's row offset (OPT)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posexport import export, verdicts
from posexport.encodings.vit_learned import grid_weights, resample_grid
from posexport.errors import ParamError
from posexport.registry import get_encoding

from .conftest import session
from .harness import normalised_error
from .encoding_checks import check_bad_params


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


def test_float_arange_is_torchs_cpu_arange():
    """NaViT's bucket boundaries torch.arange(1/N, 1, 1/N) as PyTorch's CPU kernel forms them, for every N up to
    vit-learned's largest grid; rounding each value once instead (no runs of 8) misses most of them."""
    from posexport.encodings.vit_learned import torch_float_arange

    sides = range(1, 1025)
    ours = {n: torch_float_arange(1 / n, 1.0, 1 / n) for n in sides}
    assert all(np.array_equal(ours[n], torch.arange(1 / n, 1.0, 1 / n).numpy()) for n in sides)
    once = sum(not np.array_equal((1 / n + np.arange(len(ours[n])) / n).astype(np.float32), ours[n]) for n in sides)
    assert once > 500


# Trained sides N (Idefics3's 26, SmolVLM's and Phi-4's 32, Idefics2's and MiniCPM-V's 70 among them) and every
# output size up to 2N + 1: the bucket edges where float32 i/h or i·(1/h) falls either side of a boundary.
BUCKET_SIDES = range(1, 73)


def test_quotient_buckets_are_get_vision_nearest_position_ids():
    from transformers.vision_utils import get_vision_nearest_position_ids

    from posexport.encodings.vit_learned import nearest_bucket_weights

    missed, exact_misses = [], 0
    for side in BUCKET_SIDES:
        sizes = range(1, 2 * side + 2)
        ids = get_vision_nearest_position_ids(torch.tensor([[n, 1] for n in sizes]), side).numpy() // side
        starts = np.cumsum([0, *sizes])
        for n, start in zip(sizes, starts):
            theirs = ids[start : start + n]
            missed += [] if np.array_equal(nearest_bucket_weights(side, n, "quotient").argmax(1), theirs) else [(side, n)]
            exact_misses += not np.array_equal(np.arange(n) * side // n, theirs)  # the buckets in exact arithmetic
    assert not missed and exact_misses > 100, (missed, exact_misses)


def test_reciprocal_buckets_are_idefics2_embeddings_position_ids(rng):
    """Idefics2VisionEmbeddings' own forward (its patch projection the identity, one channel, table row r holding
    r) on a batch of images of n × n patches, each masked to its first row and column (all the forward counts): the
    rows it adds there are the buckets of vit-learned's reciprocal fractions on both axes; the quotient ones miss some."""
    from transformers import Idefics2VisionConfig
    from transformers.models.idefics2.modeling_idefics2 import Idefics2VisionEmbeddings

    from posexport.encodings.vit_learned import nearest_bucket_weights

    missed, quotient_misses = [], 0
    for side in BUCKET_SIDES:
        embeddings = Idefics2VisionEmbeddings(Idefics2VisionConfig(hidden_size=1, image_size=side, patch_size=1, num_channels=1))
        embeddings.position_embedding.weight.data = torch.arange(side * side, dtype=torch.float32)[:, None]
        embeddings.patch_embedding = torch.nn.Identity()
        sizes = range(1, 2 * side + 2)
        mask = torch.zeros(len(sizes), len(sizes), len(sizes), dtype=torch.bool)
        for b, n in enumerate(sizes):
            mask[b, :n, 0] = mask[b, 0, :n] = True
        pixels = torch.from_numpy(rng.standard_normal((len(sizes), 1, len(sizes), len(sizes))).astype(np.float32))
        with torch.no_grad():
            rows = np.rint((embeddings(pixels, mask) - pixels.flatten(2).transpose(1, 2)).numpy()[..., 0]).astype(int)
        for b, n in enumerate(sizes):
            grid = rows[b].reshape(len(sizes), len(sizes))
            for theirs in (grid[:n, 0] // side, grid[0, :n] % side):  # down the first column, along the first row
                missed += [] if np.array_equal(nearest_bucket_weights(side, n, "reciprocal").argmax(1), theirs) else [(side, n)]
                quotient_misses += not np.array_equal(nearest_bucket_weights(side, n, "quotient").argmax(1), theirs)
    assert not missed and quotient_misses > 50, (missed, quotient_misses)


@pytest.mark.parametrize("fractions", ["reciprocal", "quotient"])
def test_nearest_bucket_graph_on_every_runtime(fractions):
    """Both artifacts on every runtime, with the trained-grid property at a 23 × 23 grid (whose quotient buckets
    are not the identity: the property's selection is not)."""
    values = {"dim": 8, "trained_h": 23, "trained_w": 23, "max_grid": 30, "antialias": False,
              "interpolation": "nearest-bucket", "bucket_fractions": fractions}
    for source in ("script", "torch"):
        report = verdicts.run_parity(export.build("vit-learned", values, source=source), ["ort-cpu", "reference", "torch"],
                                     properties=True)
        assert report.passed and report.properties, [(r.case, r.runtime, r.message) for r in report.failures()]


@pytest.mark.parametrize("values, option", [({"interpolation": "nearest-bucket"}, "--antialias"),
                                            ({"interpolation": "nearest-bucket", "antialias": False,
                                              "bucket_fractions": "floor"}, "--bucket-fractions"),
                                            ({"bucket_fractions": "quotient"}, "--bucket-fractions")])
def test_nearest_bucket_options_refused_where_they_mean_nothing(values, option):
    with pytest.raises(ParamError, match=option):
        get_encoding("vit-learned").params(**values)


# (Gh, Gw) -> (H, W): one axis at its trained size (resampled there all the same), shrinking, growing, one patch, non-square.
SCALE_FACTOR = [((5, 5), (5, 9)), ((16, 16), (16, 7)), ((5, 5), (2, 3)), ((16, 16), (23, 31)), ((4, 6), (1, 1)),
                ((6, 4), (20, 2))]


@pytest.mark.parametrize("trained, target", SCALE_FACTOR)
def test_scale_factor_bicubic_is_torch_interpolate_by_scale_factor(rng, trained, target):
    """The float64 weights against F.interpolate(scale_factor=((H + 0.1)/Gh, (W + 0.1)/Gw), mode="bicubic") in float64,
    IDEFICS' call, whose output is (H, W); the same table resampled by size misses it by order 1."""
    grid = rng.standard_normal((*trained, 3))
    ours = resample_grid(grid, *target, a=-0.75, antialias=False, by="scale-factor")
    scale = tuple((n + 0.1) / g for n, g in zip(target, trained))
    theirs = torch.nn.functional.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], scale_factor=scale,
                                             mode="bicubic", align_corners=False)[0].permute(1, 2, 0).numpy()
    assert theirs.shape[:2] == target and np.max(np.abs(ours - theirs)) < 1e-12
    assert np.max(np.abs(resample_grid(grid, *target, a=-0.75, antialias=False) - theirs)) > 0.1


def test_scale_factor_keeps_the_trained_grid_alone(rng):
    """At the trained grid the table is added as it is (interpolate_pos_encoding returns it there); with the other side
    not trained, the trained side's rows are resampled by (5 + 0.1)/5 all the same, as F.interpolate does."""
    grid = rng.standard_normal((5, 5, 3))
    assert np.array_equal(resample_grid(grid, 5, 5, a=-0.75, antialias=False, by="scale-factor"), grid)
    rows, _ = grid_weights(5, 5, 5, 6, a=-0.75, antialias=False, by="scale-factor")
    theirs = torch.nn.functional.interpolate(torch.eye(5, dtype=torch.float64)[None, None], scale_factor=(5.1 / 5, 1.0),
                                             mode="bicubic", align_corners=False)[0, 0].numpy()
    assert np.max(np.abs(rows - theirs)) < 1e-12 and np.max(np.abs(rows - np.eye(5))) > 0.01


def test_scale_factor_graph_on_every_runtime(rng):
    """Both artifacts on every runtime, with the trained-grid property (the kept table, bit for bit), at grids with one
    side trained (resampled there all the same), and raising past max_grid."""
    values = {"dim": 8, "trained_h": 5, "trained_w": 5, "max_grid": 12, "class_token": True, "antialias": False,
              "cubic_coefficient": -0.75, "resample_by": "scale-factor"}
    encoding = get_encoding("vit-learned")
    for source in ("script", "torch"):
        art = export.build("vit-learned", values, source=source)
        report = verdicts.run_parity(art, ["ort-cpu", "reference", "torch"], properties=True)
        assert report.passed and report.properties, [(r.case, r.runtime, r.message) for r in report.failures()]
        for grid in ((5, 9), (9, 5)):
            feeds = {"x": rng.standard_normal((2, *grid, 8)).astype(np.float32),
                     "cls": rng.standard_normal((2, 1, 8)).astype(np.float32)}
            for runtime in ("ort-cpu", "reference", "torch"):
                error = normalised_error(session(art, runtime).run(feeds), encoding.reference(art.params, feeds))
                assert error < art.options.dtype.bound(), (source, runtime, grid, error)
        past = {"x": rng.standard_normal((1, 13, 5, 8)).astype(np.float32), "cls": rng.standard_normal((1, 1, 8)).astype(np.float32)}
        for runtime in ("ort-cpu", "reference", "torch"):  # a side past max_grid gathers past the packed identity
            with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
                session(art, runtime).run(past)


@pytest.mark.parametrize("values, needle", [
    ({"resample_by": "scale-factor"}, "--resample-by 'scale-factor': only plain bicubic"),
    ({"resample_by": "scale-factor", "antialias": False, "interpolation": "bilinear"}, "--resample-by 'scale-factor'"),
    ({"resample_by": "scale", "antialias": False}, "--resample-by 'scale': must be one of size, scale-factor"),
    ({"scale_offset": 0.2}, "--scale-offset 0.2: only --resample-by scale-factor"),
    ({"resample_by": "scale-factor", "antialias": False, "scale_offset": 1.5}, "--scale-offset 1.5: must be in [0, 1)"),
    ({"resample_by": "scale-factor", "antialias": False, "scale_offset": 0.0, "trained_h": 11, "trained_w": 11,
      "max_grid": 16}, "floor(11·(15 + offset)/11) ≠ 15"),
])
def test_scale_factor_options_refused_in_one_line(values, needle):
    check_bad_params("vit-learned", values, needle)
