"""Grid encodings: x [batch, grid_h, grid_w, ...token dims] for a patch grid of any size up to the graph's
limit (docs/contract.md). vit-learned, sincos-2d and rope-2d."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from ...contract import Case, TensorSpec
from ...dtypes import DType
from ..base import Assembled
from ..inputs import grid_cases, random_normal

TYPICAL_GRID = (14, 14)  # ViT-B/16 at 224 px: the grid the sweep starts from


class GridEncoding(Assembled):
    """An encoding names ``Params``, ``oracle`` and ``Module`` and implements ``tables``, ``script_functions``,
    ``token_dims`` and ``grid_limit``, and may change ``trained_grid``, ``example_axes`` and
    ``properties``."""

    family = "vision"

    @abstractmethod
    def token_dims(self, p: Any) -> tuple[int, ...]:
        """The fixed dimensions of one grid cell, after [batch, grid_h, grid_w]."""

    @abstractmethod
    def grid_limit(self, p: Any) -> int:
        """The most rows and columns the graph covers; a larger grid makes the runtime raise."""

    def trained_grid(self, p: Any) -> tuple[int, int]:
        """The grid the sweep starts from: the trained one, or ViT-B/16's at 224 px."""
        limit = self.grid_limit(p)
        return min(TYPICAL_GRID[0], limit), min(TYPICAL_GRID[1], limit)

    def inputs(self, p: Any) -> list[TensorSpec]:
        return [TensorSpec("x", ("batch", "grid_h", "grid_w", *self.token_dims(p)))]

    def feeds(self, p: Any, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        shape = (case.axes["batch"], case.axes["grid_h"], case.axes["grid_w"], *self.token_dims(p))
        return {"x": random_normal(rng, shape, dtype)}

    def cases(self, p: Any, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return self.within_limits(p, grid_cases(self.trained_grid(p), self.grid_limit(p), seqs, batches), seqs, batches)

    def example_axes(self, p: Any) -> dict[str, int] | None:
        # Grid sizes distinct from batch, from each other and from every fixed dimension.
        sizes = [s for s in (5, 3, 7, 11, 13, 17) if s not in self.token_dims(p)]
        return {"batch": 2, "grid_h": sizes[0], "grid_w": sizes[1]}
