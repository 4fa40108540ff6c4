"""Additive rows: y = x + PE[position_ids], x and y [batch, seq, d_model], position_ids [batch, seq] int64
(docs/contract.md). Sinusoidal and learned."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ...contract import BuildOptions, Case, Property, TensorSpec
from ...dtypes import DType
from .. import properties as props
from ..base import Assembled
from ..guards import position_guard, shared_axes
from ..inputs import positions, random_normal
from .entry import cast_once_entry


class AdditiveRows(Assembled):
    """An encoding names ``Params``, ``oracle`` and ``Module`` and implements ``tables``,
    ``cases``, ``row_functions`` (its float32 core row lookup first), ``position_limit`` and
    ``row_properties``; ``entry`` names the graph's entry function."""

    family = "absolute"
    entry: ClassVar[str]

    @abstractmethod
    def row_functions(self, p: Any, op: Any) -> list[Any]:
        """core(position_ids, *tables) -> PE rows [batch, seq, d_model] in float32, then what it calls."""

    @abstractmethod
    def position_limit(self, p: Any) -> int:
        """Positions the graph covers, [0, limit): any other position makes the runtime raise."""

    def row_properties(self, p: Any, rows: props.Rows) -> list[Property]:
        """The encoding's own properties, built from posexport.encodings.properties' checks on the observed rows."""
        return []

    def inputs(self, p: Any) -> list[TensorSpec]:
        return [TensorSpec("x", ("batch", "seq", p.d_model)), TensorSpec("position_ids", ("batch", "seq"), is_float=False)]

    def script_functions(self, p: Any, opts: BuildOptions, op: Any) -> list[Any]:
        core, *callees = self.row_functions(p, op)
        tables = list(self.tables(p, opts).arrays)
        guard = position_guard(shared_axes(self.inputs(p)), op)
        # position_ids must be [batch, seq] of x: the core reads them through the guard
        entry = cast_once_entry(self.entry, ["x", "position_ids"], tables, core, ["position_ids", *tables], opts.dtype, op, guard)
        return [entry, core, guard, *callees]

    def feeds(self, p: Any, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        batch, seq = case.axes["batch"], case.axes["seq"]
        return {"x": random_normal(rng, (batch, seq, p.d_model), dtype), "position_ids": positions(rng, batch, seq, case)}

    def largest_position(self, p: Any, feeds: Mapping[str, np.ndarray]) -> int | None:
        return int(np.max(feeds["position_ids"]))

    def properties(self, p: Any) -> list[Property]:
        def feeds_at(at: np.ndarray, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
            return {"x": random_normal(rng, (*at.shape, p.d_model), dtype), "position_ids": at}

        own = self.row_properties(p, props.rows_of_additive(p.d_model))
        return [*own, props.raises_past_limit(feeds_at, self.position_limit(p))]
