"""Multimodal RoPE (M-RoPE, Qwen2-VL / Qwen2.5-VL): rope whose frequencies are split into three sections,
each turned by its own row of position_ids — temporal, height, width.

    position_ids: [3, batch, seq]   row 0 temporal, row 1 height, row 2 width (text tokens: three equal rows)
    mrope_section = (t, h, w), t + h + w = head_dim/2: frequencies θ_0 … θ_(t−1) turn with row 0, the next h
    with row 1, the last w with row 2;  θ_i = base^(−2i/head_dim), half-split pairs on the whole head

    cos_i = cos(position_ids[s(i)] · θ_i), s(i) the section of frequency i;  y as rope's half layout

Each section has its own two-level float64 tables (posexport.tables) over its frequencies, so every
position below the limit is exact and any other raises; the three lookups are concatenated along the
frequencies and handed to the rope backends' rotation (portable, onnx23, ort), which take per-token
cos/sin. With three equal rows M-RoPE is plain rope.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from onnxscript import script

from .. import tables
from ..contract import BuildOptions, Case, Tables, TensorSpec
from ..dtypes import COMPUTE, DType
from ..encodings.inputs import sequence_cases
from ..encodings.two_level import TwoLevelCosSin, cos_sin_function
from ..params import check, check_choices, param
from ..script import POSEXPORT
from . import backends
from .encoding import LAYOUTS, RopeEncoding, RotaryEmbedding, apply_rope, pin_position_limit

ROWS = ("temporal", "height", "width")
# Height and width of a vision token sit this far at most from its temporal position in the sweep.
GRID_SPREAD = 24


@dataclass(frozen=True)
class MRopeParams:
    head_dim: int = param(128, "channels per attention head (even)")
    heads: int = param(28, "attention heads")
    base: float = param(1000000.0, "rope_theta, the frequency base (> 1)")
    mrope_section: tuple[int, ...] = param((16, 24, 24), "frequencies turned by the temporal, height and width rows; sum = head_dim/2")
    layout: str = param("bshd", "axis order of x: [batch, seq, heads, dim] or [batch, heads, seq, dim]", LAYOUTS)
    max_positions: int = param(32768, "positions the model was trained for (max_position_embeddings)")
    position_limit: int | None = param(None, "positions the graph covers exactly; beyond it the runtime raises; default max(131072, 2·max_positions)")

    def __post_init__(self) -> None:
        check_choices(self)
        check(isinstance(self.head_dim, int) and self.head_dim >= 2 and self.head_dim % 2 == 0,
              "head_dim", self.head_dim, "M-RoPE needs an even dimension ≥ 2")
        check(self.heads >= 1, "heads", self.heads, "needs at least 1 head")
        check(math.isfinite(self.base) and self.base > 1, "base", self.base, "must be a finite number > 1")
        sections = self.mrope_section
        check(len(sections) == 3 and all(isinstance(s, int) and s >= 1 for s in sections)
              and sum(sections) == self.head_dim // 2, "mrope_section", ",".join(map(str, sections)),
              f"needs three positive counts summing to head_dim/2 = {self.head_dim // 2}")
        pin_position_limit(self)

    # What the rope backends' rotation reads: the whole head rotates, half-split pairs.
    @property
    def rotary_dim(self) -> int:
        return self.head_dim

    @property
    def pair_layout(self) -> str:
        return "half"


def section_slices(p: MRopeParams) -> list[slice]:
    edges = np.cumsum((0, *p.mrope_section))
    return [slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def inv_freq(p: MRopeParams) -> np.ndarray:
    return tables.plain_inv_freq(p.head_dim, p.base)


def section_tables(p: MRopeParams) -> list[tables.TwoLevelTables]:
    """One two-level table set per section, over that section's frequencies."""
    return [tables.build_two_level(inv_freq(p)[part], p.position_limit) for part in section_slices(p)]


def reference(p: MRopeParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    rows = np.asarray(feeds["position_ids"])
    theta = np.concatenate([tables.angles(rows[k], inv_freq(p)[part]) for k, part in enumerate(section_slices(p))], axis=-1)
    heads_axis = 2 if p.layout == "bshd" else 1
    cos, sin = np.expand_dims(np.cos(theta), heads_axis), np.expand_dims(np.sin(theta), heads_axis)
    return apply_rope(x, cos, sin, "half")


class MRotaryEmbedding(torch.nn.Module):
    """Three two-level lookups (one per row and section), concatenated, then rope's rotation."""

    forward = RotaryEmbedding.forward

    def __init__(self, p: MRopeParams):
        super().__init__()
        self.p = p
        self.sections = torch.nn.ModuleList(TwoLevelCosSin(t) for t in section_tables(p))

    def cos_sin(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pairs = [source(position_ids[k]) for k, source in enumerate(self.sections)]
        return torch.cat([c for c, _ in pairs], dim=-1), torch.cat([s for _, s in pairs], dim=-1)


def mrope_functions(p: MRopeParams, io: DType, op: Any, backend: str) -> list[Any]:
    """posexport.MRope(x, position_ids, 12 tables): per-section cos/sin, then the backend's RopeRotate."""
    # Every section's tables have the same rows (same limit), so one lookup function serves all three.
    cos_sin = cos_sin_function(section_tables(p)[0], op)
    rotation = backends.get_backend(backend).rotation(p, io.onnx, op)
    rotate = rotation[-1]

    @script(POSEXPORT, default_opset=op)
    def MRope(x, position_ids, fc0, fs0, cc0, cs0, fc1, fs1, cc1, cs1, fc2, fs2, cc2, cs2):
        c0, s0 = cos_sin(op.Gather(position_ids, op.Constant(value_int=0), axis=0), fc0, fs0, cc0, cs0)
        c1, s1 = cos_sin(op.Gather(position_ids, op.Constant(value_int=1), axis=0), fc1, fs1, cc1, cs1)
        c2, s2 = cos_sin(op.Gather(position_ids, op.Constant(value_int=2), axis=0), fc2, fs2, cc2, cs2)
        return rotate(x, op.Concat(c0, c1, c2, axis=-1), op.Concat(s0, s1, s2, axis=-1))

    return [MRope, cos_sin, *rotation]


def grid_rows(rng: np.random.Generator, temporal: np.ndarray, limit: int) -> np.ndarray:
    """[3, batch, seq]: the temporal row, then height and width rows a few positions behind it, as a
    vision token's grid coordinates are (kept in [0, limit))."""
    spread = rng.integers(0, GRID_SPREAD, size=(2, *temporal.shape))
    return np.concatenate([temporal[None], np.clip(temporal[None] - spread, 0, limit - 1)]).astype(np.int64)


class MRopeEncoding(RopeEncoding):
    """Rope's contract (x, tolerance, largest position) with position_ids [3, batch, seq]."""

    name = "mrope"
    Params = MRopeParams

    def inputs(self, p: MRopeParams) -> list[TensorSpec]:
        x, _ = super().inputs(p)  # rope's x; position_ids gain the three rows
        return [x, TensorSpec("position_ids", (3, "batch", "seq"), is_float=False)]

    def reference(self, p: MRopeParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return reference(p, feeds)

    def torch_module(self, p: MRopeParams, opts: BuildOptions) -> torch.nn.Module:
        return MRotaryEmbedding(p)

    def tables(self, p: MRopeParams, opts: BuildOptions) -> Tables:
        arrays = {}
        for k, t in enumerate(section_tables(p)):
            arrays.update({f"{name}_{ROWS[k]}": value for name, value in t.as_dict(COMPUTE.numpy).items()})
        return Tables(arrays)

    def script_functions(self, p: MRopeParams, opts: BuildOptions, op: Any) -> list[Any]:
        return mrope_functions(p, opts.dtype, op, opts.backend)

    def feeds(self, p: MRopeParams, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        feeds = super().feeds(p, case, dtype, rng)  # rope's x, and its positions as the temporal row
        return feeds | {"position_ids": grid_rows(rng, feeds["position_ids"], p.position_limit)}

    def cases(self, p: MRopeParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return sequence_cases(p.max_positions, p.position_limit, seqs, batches)

    def properties(self, p: MRopeParams) -> list:
        """Rope's relative position, norms and limit, on text tokens (three equal position rows)."""
        from .. import properties as props

        def text(runner: Any, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
            bshd = p.layout == "bshd"
            y = runner({"x": x if bshd else np.ascontiguousarray(np.swapaxes(x, 1, 2)), "position_ids": np.stack([rows] * 3)})
            return y if bshd else np.swapaxes(y, 1, 2)

        def feeds_at(rows: np.ndarray, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
            case = Case("limit", {"batch": 1, "seq": rows.shape[1]})
            return self.feeds(p, case, dtype, rng) | {"position_ids": np.stack([rows] * 3)}

        def tolerance(dtype: DType, largest: int) -> float:
            return 4 * dtype.bound(largest)  # as rope's: normalised scores round like the outputs

        return [
            props.relative_position(text, p.heads, p.head_dim, p.position_limit, tolerance),
            props.norm_preserved(text, p.heads, p.head_dim, p.head_dim, p.position_limit, 1.0, tolerance),
            props.raises_past_limit(feeds_at, p.position_limit),
        ]


ENCODING = MRopeEncoding()
