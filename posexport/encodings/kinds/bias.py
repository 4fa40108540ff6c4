"""Attention biases: y = scores + bias, scores and y [batch, heads, q_len, k_len], queries being the last
q_len of the k_len keys (docs/contract.md). ALiBi and T5."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from ... import properties as props
from ...contract import BuildOptions, Case, Property, TensorSpec
from ...dtypes import DType
from ..base import Assembled
from ..inputs import attention_cases, random_normal
from .entry import cast_once_entry


class AttentionBias(Assembled):
    """An encoding names ``Params``, ``oracle`` and ``Module`` and implements ``tables``,
    ``bias_functions`` (its float32 core bias function first) and ``bias_properties``; ``entry`` names
    the graph's entry function."""

    family = "attention-bias"
    entry: ClassVar[str]

    @abstractmethod
    def bias_functions(self, p: Any, op: Any) -> list[Any]:
        """core(scores, *tables) -> bias [heads, q_len, k_len] in float32, then the functions it calls."""

    @abstractmethod
    def bias_properties(self, p: Any, bias: props.Bias) -> list[Property]:
        """The encoding's properties, built from posexport.properties' checks on the observed bias."""

    def inputs(self, p: Any) -> list[TensorSpec]:
        return [TensorSpec("scores", ("batch", p.heads, "q_len", "k_len"))]

    def script_functions(self, p: Any, opts: BuildOptions, op: Any) -> list[Any]:
        core, *callees = self.bias_functions(p, op)
        tables = list(self.tables(p, opts).arrays)
        entry = cast_once_entry(self.entry, ["scores"], tables, core, ["scores", *tables], opts.dtype, op)
        return [entry, core, *callees]

    def feeds(self, p: Any, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        a = case.axes
        return {"scores": random_normal(rng, (a["batch"], p.heads, a["q_len"], a["k_len"]), dtype)}

    def cases(self, p: Any, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return self.within_limits(p, attention_cases(seqs, batches, decode_k=self.decode_keys(p)), seqs, batches)

    def decode_keys(self, p: Any) -> int:
        """Keys of the decode step in the default sweep."""
        return 5000

    def example_axes(self, p: Any) -> dict[str, int]:
        # k_len > q_len, as in a prefill chunk after a cache: the export must not tie the two axes.
        return {"batch": 2, "q_len": 3, "k_len": 7}

    def properties(self, p: Any) -> list[Property]:
        return self.bias_properties(p, props.bias_of_additive(p.heads))
