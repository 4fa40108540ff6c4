"""Multimodal RoPE (M-RoPE, Qwen2-VL / Qwen2.5-VL): rope whose frequencies are split into three sections,
each turned by its own row of position_ids — temporal, height, width (docs/models.md).

    position_ids: [3, batch, seq]   row 0 temporal, row 1 height, row 2 width (text tokens: three equal rows)
    mrope_section = (t, h, w), t + h + w = rotary_dim/2: frequencies θ_0 … θ_(t−1) turn with row 0, the next h
    with row 1, the last w with row 2;  θ_i = base^(−2i/rotary_dim)

    cos_i = cos(position_ids[s(i)] · θ_i), s(i) the section of frequency i;  y as rope's: the leading
    rotary_dim channels rotated in the pair layout (half-split as Qwen2-VL, or interleaved (2i, 2i + 1) as
    GLM-4V's rotate_half_llm), the rest passed through (rotary_dim = head_dim unless partial, as GLM-4V's)

A rotation (posexport.encodings.kinds.rotation) with rope's two-level float64 tables over all rotary_dim/2
frequencies: each section looks up its own row in its own columns of the tables, so every position below
the limit is exact and any other raises; the sections' cos/sin are concatenated along the frequencies and
handed to the rope backends' rotation (portable, onnx23, ort). With three equal rows M-RoPE is plain rope.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from onnxscript import script

from .. import tables
from ..contract import BuildOptions, Case, Property, Tables, TensorSpec
from ..dtypes import COMPUTE, DType
from ..encodings.kinds.rotation import LAYOUTS, PAIR_LAYOUTS, Rotation
from ..encodings.two_level import TwoLevelCosSin, cos_sin_function
from ..params import check, check_choices, param
from ..script import POSEXPORT
from . import backends
from .encoding import pin_position_limit

# Height and width rows of a vision token sit this far at most behind its temporal row in the sweep.
GRID_SPREAD = 24


@dataclass(frozen=True)
class MRopeParams:
    head_dim: int = param(128, "channels per attention head (even)")
    heads: int = param(28, "attention heads")
    rotary_dim: int | None = param(None, "leading channels that rotate, even, ≤ head_dim (partial rotary, GLM-4V's partial_rotary_factor); default head_dim")
    base: float = param(1000000.0, "rope_theta, the frequency base (> 1)")
    mrope_section: tuple[int, ...] = param((16, 24, 24), "frequencies turned by the temporal, height and width rows; sum = rotary_dim/2")
    pair_layout: str = param("half", "which channels pair up: half-split (Qwen-VL) or interleaved (2i, 2i + 1) (GLM-4V's rotate_half_llm)", PAIR_LAYOUTS)
    layout: str = param("bshd", "axis order of x: [batch, seq, heads, dim], [batch, heads, seq, dim] or packed [batch, seq, heads·dim]", LAYOUTS)
    max_positions: int = param(32768, "positions the model was trained for (max_position_embeddings)")
    position_limit: int | None = param(None, "positions the graph covers exactly; beyond it the runtime raises; default max(131072, 2·max_positions)")
    interleaved: bool = param(False, "Qwen3-VL's interleaved sections: frequency j turns with the height row when j ≡ 1 (mod 3) and j < 3·h, the width row when j ≡ 2 (mod 3) and j < 3·w, else the temporal row")
    axial: bool = param(False, "Qwen2-VL's vision tower: two rows (height, width), --mrope-section h,w = rotary_dim/4 each, each section's frequencies base^(−2i/(rotary_dim/2))")

    def __post_init__(self) -> None:
        check_choices(self)
        check(isinstance(self.head_dim, int) and self.head_dim >= 2 and self.head_dim % 2 == 0,
              "head_dim", self.head_dim, "M-RoPE needs an even dimension ≥ 2")
        check(self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        if self.rotary_dim is None:
            object.__setattr__(self, "rotary_dim", self.head_dim)
        check(isinstance(self.rotary_dim, int) and 0 < self.rotary_dim <= self.head_dim and self.rotary_dim % 2 == 0,
              "rotary_dim", self.rotary_dim, f"must be even and in [2, head_dim={self.head_dim}]")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        sections = self.mrope_section
        if self.axial:
            check(not self.interleaved, "axial", self.axial, "the axial form has no interleaved sections")
            check(self.rotary_dim % 4 == 0 and tuple(sections) == (self.rotary_dim // 4,) * 2, "mrope_section",
                  ",".join(map(str, sections)), f"the axial form takes two sections of rotary_dim/4 = {self.rotary_dim // 4}")
        else:
            check(len(sections) == 3 and all(isinstance(s, int) and s >= 1 for s in sections)
                  and sum(sections) == self.rotary_dim // 2, "mrope_section", ",".join(map(str, sections)),
                  f"needs three positive counts summing to rotary_dim/2 = {self.rotary_dim // 2}")
        pin_position_limit(self)

    @property
    def rows(self) -> int:
        """Rows of position_ids: temporal, height, width (the axial form: height, width)."""
        return 2 if self.axial else 3


def inv_freq(p: MRopeParams) -> np.ndarray:
    """θ_j float64: base^(−2j/rotary_dim), or (axial) the same rotary_dim/4 frequencies of width rotary_dim/2 twice."""
    if p.axial:
        return np.tile(tables.plain_inv_freq(p.rotary_dim // 2, p.base), 2)
    return tables.plain_inv_freq(p.rotary_dim, p.base)


def frequency_rows(p: MRopeParams) -> np.ndarray:
    """The position row (0 temporal, 1 height, 2 width; axial: 0 height, 1 width) turning each of the
    rotary_dim/2 frequencies."""
    n = p.rotary_dim // 2
    if not p.interleaved:
        return np.repeat(np.arange(p.rows), p.mrope_section)
    j = np.arange(n)
    _, h, w = p.mrope_section
    return np.where((j % 3 == 1) & (j < 3 * h), 1, np.where((j % 3 == 2) & (j < 3 * w), 2, 0))


def frequency_columns(p: MRopeParams) -> np.ndarray:
    """Column row·n + j of the three rows' cos (or sin) concatenated: frequency j of its own row."""
    n = p.rotary_dim // 2
    return (frequency_rows(p) * n + np.arange(n)).astype(np.int64)


class InterleavedCosSin(torch.nn.Module):
    """cos, sin [b, s, n] from position_ids [3, b, s]: every row looked up over all frequencies, then
    each frequency's own row picked (a Gather: values unchanged)."""

    def __init__(self, p: MRopeParams):
        super().__init__()
        self.lookup = TwoLevelCosSin(build_tables(p))
        self.rows = p.rows
        self.register_buffer("columns", torch.from_numpy(frequency_columns(p)))

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pairs = [self.lookup(position_ids[k]) for k in range(self.rows)]
        cos, sin = torch.cat([c for c, _ in pairs], dim=-1), torch.cat([s for _, s in pairs], dim=-1)
        return cos.index_select(-1, self.columns), sin.index_select(-1, self.columns)


def interleaved_cos_sin_function(p: MRopeParams, op: Any) -> Any:
    """posexport.MRopeInterleavedCosSin(position_ids [3, b, s], tables) -> cos, sin: each row looked up
    over every frequency, concatenated, and one Gather picking frequency j from its own row."""
    lookup = cos_sin_function(build_tables(p), op)
    columns = [int(c) for c in frequency_columns(p)]
    three = p.rows == 3

    @script(POSEXPORT, default_opset=op)
    def MRopeInterleavedCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        c0, s0 = lookup(op.Gather(position_ids, op.Constant(value_int=0), axis=0), fine_cos, fine_sin, coarse_cos, coarse_sin)
        c1, s1 = lookup(op.Gather(position_ids, op.Constant(value_int=1), axis=0), fine_cos, fine_sin, coarse_cos, coarse_sin)
        if three:
            c2, s2 = lookup(op.Gather(position_ids, op.Constant(value_int=2), axis=0), fine_cos, fine_sin, coarse_cos, coarse_sin)
            cos, sin = op.Concat(c0, c1, c2, axis=-1), op.Concat(s0, s1, s2, axis=-1)
        else:
            cos, sin = op.Concat(c0, c1, axis=-1), op.Concat(s0, s1, axis=-1)
        picked = op.Constant(value_ints=columns)
        return op.Gather(cos, picked, axis=-1), op.Gather(sin, picked, axis=-1)

    return MRopeInterleavedCosSin


def section_slices(p: MRopeParams) -> list[slice]:
    edges = np.cumsum((0, *p.mrope_section))
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def build_tables(p: MRopeParams) -> tables.TwoLevelTables:
    return tables.build_two_level(inv_freq(p), p.position_limit)


def section_tables(p: MRopeParams) -> list[tables.TwoLevelTables]:
    """Each section's columns of the tables (the same float64 values: columns are independent)."""
    full = build_tables(p)
    return [dataclasses.replace(full, **{f: getattr(full, f)[:, part] for f in ("fine_cos", "fine_sin", "coarse_cos", "coarse_sin")})
            for part in section_slices(p)]


class SectionCosSin(torch.nn.Module):
    """cos, sin [b, s, n] from position_ids [3, b, s]: row k looked up in section k's columns."""

    def __init__(self, p: MRopeParams):
        super().__init__()
        self.sections = torch.nn.ModuleList(TwoLevelCosSin(t) for t in section_tables(p))

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pairs = [source(position_ids[k]) for k, source in enumerate(self.sections)]
        return torch.cat([c for c, _ in pairs], dim=-1), torch.cat([s for _, s in pairs], dim=-1)


def section_cos_sin_function(p: MRopeParams, op: Any) -> Any:
    """posexport.MRopeCosSin(position_ids [3, b, s], fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin:
    row k of position_ids looked up in columns [a_k, b_k) of the tables (a small Slice of each table)."""
    lookup = cos_sin_function(build_tables(p), op)
    (_, a), (_, b), (_, n) = [(s.start, s.stop) for s in section_slices(p)]

    @script(POSEXPORT, default_opset=op)
    def MRopeSection(rows, lo, hi, fine_cos, fine_sin, coarse_cos, coarse_sin):
        axis = op.Constant(value_ints=[1])
        cos, sin = lookup(rows, op.Slice(fine_cos, lo, hi, axis), op.Slice(fine_sin, lo, hi, axis),
                          op.Slice(coarse_cos, lo, hi, axis), op.Slice(coarse_sin, lo, hi, axis))
        return cos, sin

    @script(POSEXPORT, default_opset=op)
    def MRopeCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        start, mid, end = op.Constant(value_ints=[0]), op.Constant(value_ints=[a]), op.Constant(value_ints=[b])
        last = op.Constant(value_ints=[n])
        c0, s0 = MRopeSection(op.Gather(position_ids, op.Constant(value_int=0), axis=0), start, mid, fine_cos, fine_sin, coarse_cos, coarse_sin)
        c1, s1 = MRopeSection(op.Gather(position_ids, op.Constant(value_int=1), axis=0), mid, end, fine_cos, fine_sin, coarse_cos, coarse_sin)
        c2, s2 = MRopeSection(op.Gather(position_ids, op.Constant(value_int=2), axis=0), end, last, fine_cos, fine_sin, coarse_cos, coarse_sin)
        return op.Concat(c0, c1, c2, axis=-1), op.Concat(s0, s1, s2, axis=-1)

    return MRopeCosSin


def reference(p: MRopeParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    return ENCODING.reference(p, feeds)


def grid_rows(rng: np.random.Generator, temporal: np.ndarray, limit: int) -> np.ndarray:
    """[3, batch, seq]: the temporal row, then height and width rows a few positions behind it, as a
    vision token's grid coordinates are (kept in [0, limit))."""
    spread = rng.integers(0, GRID_SPREAD, size=(2, *temporal.shape))
    return np.concatenate([temporal[None], np.clip(temporal[None] - spread, 0, limit - 1)]).astype(np.int64)


def on_text_rows(prop: Property, count: int = 3) -> Property:
    """A rope property checked on text tokens: [batch, seq] position_ids become three equal rows."""

    def check(runner: Any, p: Any, dtype: DType, rng: np.random.Generator) -> Any:
        def three(feeds: Mapping[str, np.ndarray]) -> np.ndarray:
            rows = np.asarray(feeds["position_ids"])
            return runner({**feeds, "position_ids": np.stack([rows] * count)} if rows.ndim == 2 else feeds)

        return prop.check(three, p, dtype, rng)

    return dataclasses.replace(prop, check=check)


class MRopeEncoding(Rotation):
    name = "mrope"
    Params = MRopeParams

    def reference_cos_sin(self, p: MRopeParams, position_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """float64 cos, sin [b, s, n]: frequency i turned by row s(i) of position_ids."""
        rows = frequency_rows(p)
        theta = np.stack([tables.angles(position_ids[k], inv_freq(p)) for k in range(p.rows)])  # [rows, b, s, n]
        theta = np.take_along_axis(theta, rows.reshape(1, 1, 1, -1), axis=0)[0]
        return np.cos(theta), np.sin(theta)

    def cos_sin_module(self, p: MRopeParams) -> torch.nn.Module:
        return InterleavedCosSin(p) if p.interleaved or p.axial else SectionCosSin(p)

    def tables(self, p: MRopeParams, opts: BuildOptions) -> Tables:
        return Tables(build_tables(p).as_dict(COMPUTE.numpy))

    def cos_sin_function(self, p: MRopeParams, op: Any) -> Any:
        return interleaved_cos_sin_function(p, op) if p.interleaved or p.axial else section_cos_sin_function(p, op)

    def rotate_functions(self, p: MRopeParams, opts: BuildOptions, op: Any) -> list[Any]:
        return backends.get_backend(opts.backend).rotation(p, opts.dtype.onnx, op)

    def inputs(self, p: MRopeParams) -> list[TensorSpec]:
        x, _ = super().inputs(p)  # rope's x; position_ids gain the three rows
        return [x, TensorSpec("position_ids", (p.rows, "batch", "seq"), is_float=False)]

    def feeds(self, p: MRopeParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        feeds = super().feeds(p, case, dtype, rng)  # rope's x, and its positions as the temporal row
        return feeds | {"position_ids": grid_rows(rng, feeds["position_ids"], p.position_limit)[3 - p.rows :]}

    def properties(self, p: MRopeParams) -> list[Property]:
        return [on_text_rows(prop, p.rows) for prop in super().properties(p)]


ENCODING = MRopeEncoding()
