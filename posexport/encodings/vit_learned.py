"""ViT learned absolute positions on a patch grid, resampled in the graph to the run-time grid (docs/encodings.md).

The trained table holds one row per patch of the trained grid (Gh, Gw), row-major, optionally after a
class-token row (timm's ``pos_embed`` [1, 1 + Gh·Gw, dim] layout):

    table: [cls? | (0,0) (0,1) … (0,Gw−1) | (1,0) … | … (Gh−1,Gw−1)]  ×  dim

For a run-time grid (H, W) the grid part is resampled like PyTorch's
``F.interpolate(mode="bicubic", align_corners=False, antialias=True)`` (or plain bicubic, bilinear with
either align_corners: Qwen3-VL's pos_embed, or antialiased bilinear: SigLIP-2's NaFlex; or NaViT's nearest
bucket of each patch's fractional coordinate: Idefics2's; or plain bicubic by a scale factor, as DINO's and IDEFICS'
interpolate_pos_encoding calls F.interpolate), which is separable:

    PE(H, W) = R_H · T · C_Wᵀ        R_H [H, Gh], C_W [W, Gw] antialiased bicubic weights, T [Gh, Gw, dim]

The weight matrices for every target size 1 … max_grid are computed in float64 at build time and packed
row after row (size n starts at row n·(n−1)/2); the graph gathers the n rows it needs, so a grid past
max_grid makes the runtime raise. At the trained size the weights are exactly the identity (nearest-bucket: a
selection, not always the identity, as transformers' float32 buckets are; scale-factor: not, but the trained grid
gathers an identity packed after the sizes), so the trained grid passes through bit-exact. The class-token row is never resampled.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import torch
from onnxscript import script

from .. import weights as weights_mod
from .. import limits
from ..contract import BuildOptions, Case, Property, Tables, TensorSpec
from ..dtypes import COMPUTE, DType
from ..errors import ParamError
from ..params import check, check_seed, param
from ..script import POSEXPORT
from . import properties as props
from .inputs import random_normal
from .kinds.grid import GridEncoding

MAX_GRID_CAP = 1024  # the packed weights grow as max_grid²·(Gh + Gw)
INTERPOLATIONS = ("bicubic", "bilinear", "nearest-bucket")
# How nearest-bucket forms output i's fractional coordinate of n in float32: i·(1/n) clamped below 1 − 1e-6
# (Idefics2's embeddings forward) or i/n (transformers' get_vision_nearest_position_ids: MiniCPM-V's).
BUCKET_FRACTIONS = ("reciprocal", "quotient")
# How output i of n finds its source coordinate: F.interpolate(size=n), (i + ½)·n_in/n − ½; or F.interpolate(scale_factor=s)
# with s = (n + scale_offset)/n_in as DINO's interpolate_pos_encoding passes it (IDEFICS'), (i + ½)/s − ½.
RESAMPLE_BY = ("size", "scale-factor")
DINO_SCALE_OFFSET = 0.1  # DINO's n + 0.1, so that floor(n_in·s) is n despite rounding
TORCH_ARANGE_RUN = 8  # floats PyTorch's CPU arange kernel forms from one float32 base (x86 builds; tests check torch.arange)
# Half-widths of the antialiased kernels' support at scale 1 (PyTorch's interp_size / 2).
AA_RADIUS = {"bicubic": 2.0, "bilinear": 1.0}


@dataclass(frozen=True)
class VitLearnedParams:
    dim: int = param(768, "channels of a patch token")
    trained_h: int = param(14, "rows of the trained patch grid (Gh)")
    trained_w: int = param(14, "columns of the trained patch grid (Gw)")
    class_token: bool = param(
        False, "the table starts with a class-token row (never resampled): adds input cls [batch, 1, dim] and y becomes "
        "the token sequence [batch, 1 + grid_h·grid_w, dim]"
    )
    distillation_token: bool = param(
        False, "after the class-token row, a distillation-token row (DeiT): cls becomes [batch, 2, dim] and y "
        "[batch, 2 + grid_h·grid_w, dim]"
    )
    max_grid: int = param(64, "largest grid_h and grid_w the graph resamples to; a larger grid makes the runtime raise")
    cubic_coefficient: float = param(
        -0.5, "Keys cubic coefficient a; −0.5 is what torch's bicubic with antialias=True uses (PIL's), −0.75 OpenCV's"
    )
    antialias: bool = param(True, "resample like F.interpolate(antialias=True) (timm; bilinear: SigLIP-2's NaFlex); false: "
                                  "plain bicubic with clamped edges, as transformers' ViT interpolate_pos_encoding (with "
                                  "--cubic-coefficient -0.75), or plain bilinear (Qwen3-VL's pos_embed)")
    interpolation: str = param("bicubic", "bicubic, bilinear (2 taps per axis unless antialiased and shrinking), or "
                                          "nearest-bucket (NaViT's bucketized fractional coordinates: one row each)")
    bucket_fractions: str = param("reciprocal", "nearest-bucket only: output i of n sits at i·(1/n) clamped below 1 − 1e-6 "
                                                "(reciprocal: Idefics2, Idefics3, SmolVLM, Phi-4-MM) or at i/n (quotient: "
                                                "MiniCPM-V), in float32 as transformers forms it")
    align_corners: bool = param(False, "bilinear only: output i samples input i·(Gh − 1)/(H − 1), corners on corners "
                                       "(F.interpolate align_corners=True, as Qwen3-VL); false: half-pixel centres")
    resample_by: str = param("size", "size: output i of H samples (i + ½)·Gh/H − ½, as F.interpolate(size=...); "
                                     "scale-factor: (i + ½)/s − ½ with s = (H + scale_offset)/Gh, as F.interpolate("
                                     "scale_factor=s) (DINO's and IDEFICS' interpolate_pos_encoding, which leaves the "
                                     "trained grid itself as it is); plain bicubic only")
    scale_offset: float = param(DINO_SCALE_OFFSET, "scale-factor only: what H gains before dividing by Gh (DINO's 0.1, "
                                                   "so that floor(Gh·s) = H)")
    weights: str | None = param(None, "trained table (.npy, .safetensors, torch state dict), [1+]Gh·Gw × dim, e.g. timm pos_embed")
    key: str | None = param(None, "tensor name inside --weights (e.g. pos_embed)")
    seed: int = param(0, "seed of the N(0, 0.02) table used without --weights")
    weights_sha256: str | None = param(None, "sha256 of --weights, filled in at build; a file that changed since is an error")

    def __post_init__(self) -> None:
        check_seed(self)
        check(self.dim >= 1, "dim", self.dim, "must be ≥ 1")
        check(self.trained_h >= 1, "trained_h", self.trained_h, "must be ≥ 1")
        check(self.trained_w >= 1, "trained_w", self.trained_w, "must be ≥ 1")
        largest = max(self.trained_h, self.trained_w)
        check(largest <= self.max_grid <= MAX_GRID_CAP, "max_grid", self.max_grid,
              f"must be in [max(trained_h, trained_w)={largest}, {MAX_GRID_CAP}]")
        check(math.isfinite(self.cubic_coefficient) and -1.0 <= self.cubic_coefficient < 0.0,
              "cubic_coefficient", self.cubic_coefficient, "must be in [−1, 0), e.g. −0.5 (torch antialias) or −0.75")
        check(self.seed >= 0, "seed", self.seed, "must be ≥ 0")
        check(self.interpolation in INTERPOLATIONS, "interpolation", self.interpolation, f"must be one of {', '.join(INTERPOLATIONS)}")
        check(self.interpolation == "bilinear" or not self.align_corners, "align_corners", self.align_corners,
              "only bilinear resampling takes align_corners")
        check(not (self.antialias and self.align_corners), "align_corners", self.align_corners,
              "antialiased bilinear has half-pixel centres: give --antialias false for corners aligned")
        check(self.interpolation != "nearest-bucket" or not self.antialias, "antialias", self.antialias,
              "nearest-bucket selects one row per patch, nothing to antialias: give --antialias false")
        check(self.bucket_fractions in BUCKET_FRACTIONS, "bucket_fractions", self.bucket_fractions,
              f"must be one of {', '.join(BUCKET_FRACTIONS)}")
        check(self.interpolation == "nearest-bucket" or self.bucket_fractions == "reciprocal", "bucket_fractions",
              self.bucket_fractions, "only nearest-bucket takes bucket_fractions")
        check(self.resample_by in RESAMPLE_BY, "resample_by", self.resample_by, f"must be one of {', '.join(RESAMPLE_BY)}")
        check(self.resample_by == "size" or (self.interpolation == "bicubic" and not self.antialias), "resample_by",
              self.resample_by, "only plain bicubic (--interpolation bicubic --antialias false) is resampled by a "
              "scale factor (IDEFICS')")
        check(self.resample_by == "scale-factor" or self.scale_offset == DINO_SCALE_OFFSET, "scale_offset",
              self.scale_offset, "only --resample-by scale-factor takes scale_offset")
        if self.resample_by == "scale-factor":
            check_scale_offset(self)
        check(self.class_token or not self.distillation_token, "distillation_token", self.distillation_token,
              "comes after a class token: give --class-token true too")
        limits.check_tokens([("dim", self.dim)], "x (one patch each)")
        limits.check_product([("trained_h", self.trained_h), ("trained_w", self.trained_w), ("dim", self.dim)], "the position table")
        if weights_mod.pin_params(self):
            trained_table(self)  # shape errors surface here, naming --weights

    @property
    def prefix(self) -> int:
        """Token rows before the grid, never resampled: class token, then DeiT's distillation token."""
        return int(self.class_token) + int(self.distillation_token)

    @property
    def table_rows(self) -> int:
        return self.prefix + self.trained_h * self.trained_w

    @property
    def resampling(self) -> dict[str, Any]:
        """How one axis is resampled (axis_weights' keywords)."""
        return {"a": self.cubic_coefficient, "antialias": self.antialias, "interpolation": self.interpolation,
                "align_corners": self.align_corners, "fractions": self.bucket_fractions, "by": self.resample_by,
                "offset": self.scale_offset}


def check_scale_offset(p: VitLearnedParams) -> None:
    """F.interpolate(scale_factor=s) makes floor(n_in·s) rows (in float64): that must be the grid's own size."""
    check(math.isfinite(p.scale_offset) and 0.0 <= p.scale_offset < 1.0, "scale_offset", p.scale_offset,
          "must be in [0, 1), e.g. 0.1 (DINO's)")
    for n_in in {p.trained_h, p.trained_w}:
        short = next((n for n in range(1, p.max_grid + 1)
                      if math.floor(float(n_in) * scale_factor(n_in, n, p.scale_offset)) != n), None)
        check(short is None, "scale_offset", p.scale_offset,
              f"F.interpolate would make floor({n_in}·({short} + offset)/{n_in}) ≠ {short} rows; give an offset like 0.1")


def scale_factor(n_in: int, n_out: int, offset: float) -> float:
    """The scale factor DINO's interpolate_pos_encoding passes for n_out patches: (n_out + offset)/n_in, float64."""
    return (n_out + offset) / n_in


# --- pure functions: the table, antialiased bicubic weights, the float64 oracle --------------------


def trained_table(p: VitLearnedParams) -> np.ndarray:
    """The table [prefix + Gh·Gw, dim] in float64: from --weights, or seeded N(0, 0.02)."""
    if p.weights is None:
        return np.random.default_rng(p.seed).normal(0.0, 0.02, (p.table_rows, p.dim))
    return _load_table(p.weights, p.key, p.weights_sha256, p.trained_h, p.trained_w, p.dim, p.prefix)


@functools.lru_cache(maxsize=8)
def _load_table(path: str, key: str | None, digest: str | None, gh: int, gw: int, dim: int, prefix: int) -> np.ndarray:
    array = weights_mod.load_table(path, key, None, what="position table")
    rows = prefix + gh * gw
    cls = prefix > 0
    accepted = [(rows, dim), (1, rows, dim)] + ([] if cls else [(gh, gw, dim)])
    if array.shape not in accepted:
        wanted = " or ".join("[" + ", ".join(map(str, s)) + "]" for s in accepted)
        raise ParamError("weights", path, f"holds a table of shape {list(array.shape)}; expected {wanted}: "
                         f"{f'{prefix} token row(s) then ' if cls else ''}the --trained-h {gh} × --trained-w {gw} grid "
                         f"row-major, --dim {dim}{'' if cls else ' (a class-token row needs --class-token true)'}")
    array = array.reshape(rows, dim)
    array.flags.writeable = False
    return array


def split_table(p: VitLearnedParams) -> tuple[np.ndarray | None, np.ndarray]:
    """(token rows [prefix, dim] or None, grid [Gh, Gw, dim])."""
    table = trained_table(p)
    cls, grid = (table[: p.prefix], table[p.prefix :]) if p.class_token else (None, table)
    return cls, grid.reshape(p.trained_h, p.trained_w, p.dim)


def keys_cubic(x: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient a (support |x| < 2)."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def triangle(x: np.ndarray) -> np.ndarray:
    """The bilinear (tent) kernel 1 − |x| (support |x| < 1)."""
    return np.maximum(1.0 - np.abs(x), 0.0)


def aa_bicubic_weights(n_in: int, n_out: int, a: float) -> np.ndarray:
    """[n_out, n_in] weights of antialiased bicubic resampling along one axis (align_corners false)."""
    return antialiased_weights(n_in, n_out, lambda x: keys_cubic(x, a), AA_RADIUS["bicubic"])


def aa_bilinear_weights(n_in: int, n_out: int) -> np.ndarray:
    """[n_out, n_in] weights of antialiased bilinear resampling along one axis (align_corners false): PyTorch's
    _upsample_bilinear2d_aa, the tent widened by the scale when shrinking."""
    return antialiased_weights(n_in, n_out, triangle, AA_RADIUS["bilinear"])


def antialiased_weights(n_in: int, n_out: int, kernel: Any, radius: float) -> np.ndarray:
    """[n_out, n_in] weights of F.interpolate(antialias=True) along one axis with this kernel (support |x| < radius).

    Output sample i sits at input coordinate centre = (i + ½)·s, s = n_in/n_out. When downscaling (s > 1)
    the kernel is stretched by s (it low-pass filters) and its support grows to radius·s; upscaling uses the
    plain kernel. Taps are the input samples j whose centre j + ½ lies within the support, clipped to the
    input; weights are kernel((j + ½ − centre)/max(s, 1)) divided by their sum, so truncated edges renormalise.
    """
    scale = n_in / n_out
    stretch = max(scale, 1.0)
    support = radius * stretch
    centre = scale * (np.arange(n_out) + 0.5)[:, None]  # [n_out, 1]
    taps = np.arange(n_in)[None, :]  # [1, n_in]
    # The first and one-past-last tap; astype truncates toward zero like PyTorch's cast, and negatives
    # are clipped to 0 anyway.
    lo = np.maximum((centre - support + 0.5).astype(np.int64), 0)
    hi = np.minimum((centre + support + 0.5).astype(np.int64), n_in)
    weights = np.where((taps >= lo) & (taps < hi), kernel((taps + 0.5 - centre) / stretch), 0.0)
    return weights / weights.sum(axis=1, keepdims=True)


def plain_bicubic_weights(n_in: int, n_out: int, a: float, step: float | None = None) -> np.ndarray:
    """[n_out, n_in] weights of F.interpolate(mode="bicubic", align_corners=False, antialias=False): output i
    samples input coordinate (i + ½)·step − ½ from its four neighbours, indices clamped to the edge; step is
    n_in/n_out (size=n_out) or 1/s (scale_factor=s, as PyTorch's kernel takes it)."""
    source = (np.arange(n_out) + 0.5) * (n_in / n_out if step is None else step) - 0.5
    first = np.floor(source).astype(np.int64)
    weights = np.zeros((n_out, n_in))
    for k in range(-1, 3):
        taps = np.clip(first + k, 0, n_in - 1)
        np.add.at(weights, (np.arange(n_out), taps), keys_cubic(source - (first + k), a))
    return weights


def bilinear_weights(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """[n_out, n_in] weights of F.interpolate(mode="bilinear") along one axis: output i samples input
    coordinate s = i·(n_in − 1)/max(n_out − 1, 1) (align_corners) or (i + ½)·n_in/n_out − ½, from its two
    neighbours ⌊s⌋ and ⌊s⌋ + 1 with weights 1 − |s − tap|, indices clamped to the edge."""
    i = np.arange(n_out)
    source = i * (n_in - 1) / max(n_out - 1, 1) if align_corners else (i + 0.5) * (n_in / n_out) - 0.5
    first = np.floor(source).astype(np.int64)
    weights = np.zeros((n_out, n_in))
    for k in range(2):
        np.add.at(weights, (i, np.clip(first + k, 0, n_in - 1)), 1.0 - np.abs(source - (first + k)))
    return weights


def torch_float_arange(start: float, end: float, step: float) -> np.ndarray:
    """torch.arange(start, end, step) in float32 as PyTorch's CPU kernel forms it: ⌈(end − start)/step⌉ values
    (in float64); while two whole runs of 8 remain, each run from a float32 base start + i·step, its values
    base + k·step in float64 rounded to float32 (so rounded twice); the rest start + i·step rounded once. The two
    differ in the last place often enough to move a bucket boundary past a patch's coordinate."""
    count = math.ceil((end - start) / step)
    values = (start + step * np.arange(count)).astype(np.float32)
    runs = count // (2 * TORCH_ARANGE_RUN) * 2 * TORCH_ARANGE_RUN
    bases = np.repeat(values[:runs:TORCH_ARANGE_RUN].astype(np.float64), TORCH_ARANGE_RUN)
    values[:runs] = (bases + np.tile(np.arange(TORCH_ARANGE_RUN), runs // TORCH_ARANGE_RUN) * step).astype(np.float32)
    return values


def nearest_bucket_weights(n_in: int, n_out: int, fractions: str) -> np.ndarray:
    """[n_out, n_in] one-hot weights of NaViT's position ids along one axis, as transformers computes them in float32:
    output i's fractional coordinate (i·(1/n_out) clamped to 1 − 1e-6, or i/n_out) bucketized (right=True) by the
    boundaries torch.arange(1/n_in, 1, 1/n_in); past n_in outputs, rows repeat."""
    boundaries = torch_float_arange(1 / n_in, 1.0, 1 / n_in)
    i = np.arange(n_out, dtype=np.float32)
    if fractions == "reciprocal":
        coords = np.minimum(i * (np.float32(1) / np.float32(n_out)), np.float32(1 - 1e-6))
    else:
        coords = i / np.float32(n_out)
    return np.eye(n_in)[np.searchsorted(boundaries, coords, side="right")]


def axis_weights(n_in: int, n_out: int, a: float, antialias: bool = True, interpolation: str = "bicubic",
                 align_corners: bool = False, fractions: str = "reciprocal", by: str = "size",
                 offset: float = DINO_SCALE_OFFSET) -> np.ndarray:
    if by == "scale-factor":
        return plain_bicubic_weights(n_in, n_out, a, 1.0 / scale_factor(n_in, n_out, offset))
    if interpolation == "nearest-bucket":
        return nearest_bucket_weights(n_in, n_out, fractions)
    if interpolation == "bilinear":
        return aa_bilinear_weights(n_in, n_out) if antialias else bilinear_weights(n_in, n_out, align_corners)
    return aa_bicubic_weights(n_in, n_out, a) if antialias else plain_bicubic_weights(n_in, n_out, a)


def packed_weights(n_in: int, max_out: int, **resampling: Any) -> np.ndarray:
    """Weights for every output size n = 1 … max_out stacked: size n is rows n·(n−1)/2 … n·(n+1)/2 − 1; resampled
    by a scale factor, the identity follows (rows max_out·(max_out+1)/2 …) for the trained grid, kept as it is."""
    sizes = [axis_weights(n_in, n, **resampling) for n in range(1, max_out + 1)]
    return np.concatenate(sizes + ([np.eye(n_in)] if resampling.get("by") == "scale-factor" else []), axis=0)


def grid_weights(gh: int, gw: int, h: int, w: int, **resampling: Any) -> tuple[np.ndarray, np.ndarray]:
    """[h, Gh] and [w, Gw] weights for the grid (h, w). Resampled by a scale factor, the trained grid is kept as it is
    (interpolate_pos_encoding returns the table there), though either size alone is resampled at the others."""
    if resampling.get("by") == "scale-factor" and (h, w) == (gh, gw):
        return np.eye(gh), np.eye(gw)
    return axis_weights(gh, h, **resampling), axis_weights(gw, w, **resampling)


def resample_grid(grid: np.ndarray, h: int, w: int, a: float, antialias: bool = True, **mode: Any) -> np.ndarray:
    """grid [Gh, Gw, dim] -> [h, w, dim], separable (bicubic or bilinear, antialiased unless asked not to; or
    nearest-bucket), float64."""
    rows, cols = grid_weights(grid.shape[0], grid.shape[1], h, w, a=a, antialias=antialias, **mode)
    return np.einsum("hi,wj,ijd->hwd", rows, cols, grid)


def reference(p: VitLearnedParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    batch, h, w, dim = x.shape
    cls_row, grid = split_table(p)
    y = x + resample_grid(grid, h, w, **p.resampling)[None]
    if not p.class_token:
        return y
    first = np.asarray(feeds["cls"]).astype(np.float64) + cls_row[None]
    return np.concatenate([first, y.reshape(batch, h * w, dim)], axis=1)


# --- torch ------------------------------------------------------------------------------------------


class VitLearnedEmbedding(torch.nn.Module):
    """Holds the grid table and the packed resampling weights; forward(x[, cls]) -> y for any grid.

    F.interpolate(antialias=True) does not export; the packed weight matrices do the same resampling."""

    def __init__(self, p: VitLearnedParams):
        super().__init__()
        self.p = p
        cls_row, grid = split_table(p)
        f32 = COMPUTE.numpy
        self.register_buffer("grid_table", torch.from_numpy(grid.reshape(p.trained_h, -1).astype(f32)), persistent=False)
        for name, n_in in (("row_weights", p.trained_h), ("col_weights", p.trained_w)):
            packed = packed_weights(n_in, p.max_grid, **p.resampling).astype(f32)
            self.register_buffer(name, torch.from_numpy(packed), persistent=False)
        if cls_row is not None:
            self.register_buffer("cls_table", torch.from_numpy(cls_row.astype(f32)), persistent=False)

    @staticmethod
    def weights_for(packed: torch.Tensor, n: int) -> torch.Tensor:
        # embedding raises on rows past the packed table, i.e. on sizes past max_grid (arange + offset, not
        # arange(start, end): onnxruntime turns a Gather of a Range into a Slice, which clamps).
        return torch.nn.functional.embedding(torch.arange(n) + n * (n - 1) // 2, packed)

    def scale_factor_weights(self, h: int, w: int) -> tuple[torch.Tensor, torch.Tensor]:
        # The trained grid gathers the identity packed after every size; as tensors (not Python comparisons of the
        # sizes), so that the export keeps both branches.
        one = torch.ones((), dtype=torch.int64)
        kept = ((one * h) == self.p.trained_h) & ((one * w) == self.p.trained_w)
        identity = self.p.max_grid * (self.p.max_grid + 1) // 2
        rows, cols = (torch.nn.functional.embedding(torch.arange(n) + torch.where(kept, identity, one * (n * (n - 1) // 2)),
                                                    packed) for packed, n in ((self.row_weights, h), (self.col_weights, w)))
        return rows, cols

    def resampled(self, h: int, w: int) -> torch.Tensor:
        if self.p.resample_by == "scale-factor":
            rows, cols = self.scale_factor_weights(h, w)
        else:
            rows = self.weights_for(self.row_weights, h)  # [H, Gh]
            cols = self.weights_for(self.col_weights, w)  # [W, Gw]
        by_rows = (rows @ self.grid_table).reshape(h, self.p.trained_w, self.p.dim)  # [H, Gw, dim]
        return cols @ by_rows  # [W, Gw] @ [H, Gw, dim] -> [H, W, dim]

    def forward(self, x: torch.Tensor, cls: torch.Tensor | None = None) -> torch.Tensor:
        y = x.to(torch.float32) + self.resampled(x.shape[1], x.shape[2])
        if cls is not None:
            first = cls.to(torch.float32) + self.cls_table
            y = torch.cat([first, y.flatten(1, 2)], dim=1)
        return y.to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def vit_functions(p: VitLearnedParams, io: DType, op: Any) -> list[Any]:
    gh, gw, dim = p.trained_h, p.trained_w, p.dim
    identity = p.max_grid * (p.max_grid + 1) // 2  # where the trained grid's identity is packed (scale-factor)
    float32, out_type = onnx.TensorProto.FLOAT, io.onnx

    @script(POSEXPORT, default_opset=op)
    def VitResampleWeights(size, packed):
        # Rows size·(size−1)/2 … of the packed weights; Gather raises for a size past max_grid. The
        # offset is added after Range: onnxruntime rewrites Gather(Range(a, b)) into a Slice, which clamps.
        one = op.Constant(value_int=1)
        start = op.Div(op.Mul(size, op.Sub(size, one)), op.Constant(value_int=2))
        return op.Gather(packed, op.Add(op.Range(op.Constant(value_int=0), size, one), start))

    @script(POSEXPORT, default_opset=op)
    def VitResampledTable(x, row_weights, col_weights, grid_table):
        shape = op.Shape(x)
        rows = VitResampleWeights(op.Gather(shape, op.Constant(value_int=1)), row_weights)  # [H, Gh]
        cols = VitResampleWeights(op.Gather(shape, op.Constant(value_int=2)), col_weights)  # [W, Gw]
        by_rows = op.Reshape(op.MatMul(rows, grid_table), op.Constant(value_ints=[-1, gw, dim]))  # [H, Gw, dim]
        return op.MatMul(cols, by_rows)  # [W, Gw] @ [H, Gw, dim] -> [H, W, dim]

    @script(POSEXPORT, default_opset=op)
    def VitScaleFactorWeights(size, kept, packed):
        # Size's rows of the packed weights, or the identity after them where the trained grid is kept.
        one = op.Constant(value_int=1)
        start = op.Where(kept, op.Constant(value_int=identity),
                         op.Div(op.Mul(size, op.Sub(size, one)), op.Constant(value_int=2)))
        return op.Gather(packed, op.Add(op.Range(op.Constant(value_int=0), size, one), start))

    @script(POSEXPORT, default_opset=op)
    def VitScaleFactorTable(x, row_weights, col_weights, grid_table):
        shape = op.Shape(x)
        h = op.Gather(shape, op.Constant(value_int=1))
        w = op.Gather(shape, op.Constant(value_int=2))
        kept = op.And(op.Equal(h, op.Constant(value_int=gh)), op.Equal(w, op.Constant(value_int=gw)))
        rows = VitScaleFactorWeights(h, kept, row_weights)  # [H, Gh]
        cols = VitScaleFactorWeights(w, kept, col_weights)  # [W, Gw]
        by_rows = op.Reshape(op.MatMul(rows, grid_table), op.Constant(value_ints=[-1, gw, dim]))  # [H, Gw, dim]
        return op.MatMul(cols, by_rows)  # [W, Gw] @ [H, Gw, dim] -> [H, W, dim]

    scaled = p.resample_by == "scale-factor"
    VitTable = VitScaleFactorTable if scaled else VitResampledTable
    callees = [VitScaleFactorWeights, VitScaleFactorTable] if scaled else [VitResampleWeights, VitResampledTable]

    if not p.class_token:

        @script(POSEXPORT, default_opset=op)
        def VitLearned(x, row_weights, col_weights, grid_table):
            pe = VitTable(x, row_weights, col_weights, grid_table)
            return op.Cast(op.Add(op.Cast(x, to=float32), pe), to=out_type)

    else:

        @script(POSEXPORT, default_opset=op)
        def VitLearned(x, cls, row_weights, col_weights, grid_table, cls_table):
            pe = VitTable(x, row_weights, col_weights, grid_table)
            patches = op.Reshape(op.Add(op.Cast(x, to=float32), pe), op.Constant(value_ints=[0, -1, dim]))
            first = op.Add(op.Cast(cls, to=float32), cls_table)
            return op.Cast(op.Concat(first, patches, axis=1), to=out_type)

    return [VitLearned, *callees]  # callees before callers after the entry


def build_tables(p: VitLearnedParams) -> dict[str, np.ndarray]:
    cls_row, grid = split_table(p)
    f32 = COMPUTE.numpy
    out = {
        "row_weights": packed_weights(p.trained_h, p.max_grid, **p.resampling).astype(f32),
        "col_weights": packed_weights(p.trained_w, p.max_grid, **p.resampling).astype(f32),
        "grid_table": grid.reshape(p.trained_h, -1).astype(f32),
    }
    if cls_row is not None:
        out["cls_table"] = cls_row.astype(f32)
    return out


# --- properties -------------------------------------------------------------------------------------


def trained_grid_expected(p: VitLearnedParams) -> props.Expected:
    """Feeds at the trained grid and their output: x + the table rows its weights select there (every row in
    place, or nearest-bucket's selection), computed in float32 and rounded once."""
    rows, cols = (w.argmax(axis=1) for w in grid_weights(p.trained_h, p.trained_w, p.trained_h, p.trained_w, **p.resampling))

    def expected(dtype: DType, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray]:
        feeds = {"x": random_normal(rng, (2, p.trained_h, p.trained_w, p.dim), dtype)} | class_feeds(p, 2, dtype, rng)
        cls_row, grid = (part.astype(np.float32) if part is not None else None for part in split_table(p))
        want = feeds["x"].astype(np.float32) + grid[np.ix_(rows, cols)][None]
        if p.class_token:
            first = feeds["cls"].astype(np.float32) + cls_row[None]
            want = np.concatenate([first, want.reshape(2, -1, p.dim)], axis=1)
        return feeds, want.astype(dtype.numpy)

    return expected


def class_feeds(p: VitLearnedParams, batch: int, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"cls": random_normal(rng, (batch, p.prefix, p.dim), dtype)} if p.class_token else {}


# --- the encoding -----------------------------------------------------------------------------------


class VitLearnedEncoding(GridEncoding):
    name = "vit-learned"
    Params = VitLearnedParams
    oracle = staticmethod(reference)
    Module = VitLearnedEmbedding

    def token_dims(self, p: VitLearnedParams) -> tuple[int, ...]:
        return (p.dim,)

    def source_coordinate_extent(self, p: VitLearnedParams) -> int | None:
        # transformers' interpolate forms each source coordinate in float32 across the trained grid; its buckets
        # select whole rows
        return None if p.interpolation == "nearest-bucket" else max(p.trained_h, p.trained_w)

    def grid_limit(self, p: VitLearnedParams) -> int:
        return p.max_grid

    def trained_grid(self, p: VitLearnedParams) -> tuple[int, int]:
        return p.trained_h, p.trained_w

    def inputs(self, p: VitLearnedParams) -> list[TensorSpec]:
        return super().inputs(p) + ([TensorSpec("cls", ("batch", p.prefix, p.dim))] if p.class_token else [])

    def outputs(self, p: VitLearnedParams) -> list[TensorSpec]:
        if p.class_token:
            return [TensorSpec("y", ("batch", "tokens", p.dim))]
        return super().outputs(p)

    def derived_axes(self, p: VitLearnedParams, sizes: Mapping[str, int]) -> dict[str, int]:
        if p.class_token:
            return {"tokens": p.prefix + sizes["grid_h"] * sizes["grid_w"]}
        return {}

    def tables(self, p: VitLearnedParams, opts: BuildOptions) -> Tables:
        return Tables(build_tables(p))

    def script_functions(self, p: VitLearnedParams, opts: BuildOptions, op: Any) -> list[Any]:
        return vit_functions(p, opts.dtype, op)

    def feeds(self, p: VitLearnedParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return super().feeds(p, case, dtype, rng) | class_feeds(p, case.axes["batch"], dtype, rng)

    def example_axes(self, p: VitLearnedParams) -> dict[str, int] | None:
        # Distinct from each other, from batch and from the trained grid, within max_grid.
        sizes = [s for s in range(3, p.max_grid + 1) if s not in (p.trained_h, p.trained_w)][:2]
        return {"batch": 2, "grid_h": sizes[0], "grid_w": sizes[-1]} if len(sizes) == 2 else None

    def properties(self, p: VitLearnedParams) -> list[Property]:
        return [props.bit_exact("trained-grid-exact", "at the trained grid y is x + the table rows its weights select "
                                "(bicubic, bilinear: every row in place) bit for bit (no resampling error)",
                                trained_grid_expected(p))]


ENCODING = VitLearnedEncoding()
