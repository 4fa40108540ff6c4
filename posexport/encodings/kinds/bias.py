"""Attention biases, as a graph of one of two outputs (``--output``, docs/contract.md):

    scores  y = scores + bias, scores and y [batch, heads, q_len, k_len], queries being the last q_len of
            the k_len keys
    bias    only the additive bias [1, heads, q_len, k_len] (broadcast over batch), from the positions of
            the queries q_positions [q_len] and of the keys k_positions [k_len] (int64): the form ONNX
            Attention's attn_mask (opset 23) and onnxruntime's MultiHeadAttention/GroupQueryAttention
            attention_bias take, so a model computes it once per step for all its layers

ALiBi and T5.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from onnxscript import script

from ...contract import BuildOptions, Case, Property, TensorSpec
from ...dtypes import DType
from ...script import POSEXPORT
from .. import properties as props
from ..base import Assembled
from ..inputs import attention_cases, random_normal
from .entry import cast_once_entry

OUTPUTS = ("scores", "bias")


def bias_only(p: Any) -> bool:
    return p.output == "bias"


def default_positions(q_len: int, k_len: int) -> dict[str, np.ndarray]:
    """The queries as the last q_len of the k_len keys (a prefill chunk after a cache, a decode step)."""
    return {"q_positions": np.arange(k_len - q_len, k_len, dtype=np.int64), "k_positions": np.arange(k_len, dtype=np.int64)}


def bias_of_output(runner: Any, q_len: int, k_len: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
    """The bias of a bias-only graph, [heads, q_len, k_len] in float64 (properties.Bias)."""
    return np.asarray(runner(default_positions(q_len, k_len))).astype(np.float64)[0]


def positions_function(op: Any) -> Any:
    """posexport.AttentionPositions(scores) -> q_positions [q_len], k_positions [k_len]: the queries as the
    last q_len of the k_len keys, from the scores' shape (a y = scores + bias graph)."""

    @script(POSEXPORT, default_opset=op)
    def AttentionPositions(scores):
        q_len = op.Squeeze(op.Shape(scores, start=2, end=3))
        k_len = op.Squeeze(op.Shape(scores, start=3, end=4))
        one = op.Constant(value_int=1)
        return op.Range(op.Sub(k_len, q_len), k_len, one), op.Range(op.Constant(value_int=0), k_len, one)

    return AttentionPositions


class ScoresPlusBias(torch.nn.Module):
    """forward(scores) -> scores + bias, the bias of queries that are the last q_len of the k_len keys,
    computed in float32 by a module of the positions; y in the scores' dtype."""

    def __init__(self, bias: torch.nn.Module):
        super().__init__()
        self.bias = bias

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        q_len, k_len = scores.shape[-2], scores.shape[-1]
        q_positions = torch.arange(k_len - q_len, k_len, device=scores.device)
        k_positions = torch.arange(k_len, device=scores.device)
        return (scores.to(torch.float32) + self.bias(q_positions, k_positions)).to(scores.dtype)


class BiasOnlyModule(torch.nn.Module):
    """forward(q_positions, k_positions) -> bias [1, heads, q, k] in the I/O dtype, from a module that
    computes the float32 bias [heads, q, k] of those positions."""

    def __init__(self, bias: torch.nn.Module, dtype: torch.dtype):
        super().__init__()
        self.bias, self.dtype = bias, dtype

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return self.bias(q_positions, k_positions).unsqueeze(0).to(self.dtype)


class AttentionBias(Assembled):
    """An encoding names ``Params`` (with ``heads`` and ``output``) and ``oracle`` and implements ``tables``, ``bias_functions`` (its float32 core first), ``position_bias`` (the float64
    bias of given positions), ``position_module``, ``position_functions`` and ``bias_properties``;
    ``entry`` names the graph's entry function."""

    family = "attention-bias"
    entry: ClassVar[str]

    @abstractmethod
    def bias_functions(self, p: Any, op: Any) -> list[Any]:
        """core(scores, *tables) -> bias [heads, q_len, k_len] in float32, then the functions it calls."""

    @abstractmethod
    def position_functions(self, p: Any, op: Any) -> list[Any]:
        """core(q_positions, k_positions, *tables) -> bias [1, heads, q_len, k_len] in float32, then the
        functions it calls (``--output bias``)."""

    @abstractmethod
    def position_bias(self, p: Any, q_positions: np.ndarray, k_positions: np.ndarray) -> np.ndarray:
        """The float64 bias [heads, q_len, k_len] of queries and keys at these positions."""

    @abstractmethod
    def position_module(self, p: Any) -> torch.nn.Module:
        """forward(q_positions, k_positions) -> the float32 bias [heads, q_len, k_len]."""

    @abstractmethod
    def bias_properties(self, p: Any, bias: props.Bias) -> list[Property]:
        """The encoding's properties, built from posexport.encodings.properties' checks on the observed bias."""

    def inputs(self, p: Any) -> list[TensorSpec]:
        if bias_only(p):
            return [TensorSpec("q_positions", ("q_len",), is_float=False), TensorSpec("k_positions", ("k_len",), is_float=False)]
        return [TensorSpec("scores", ("batch", p.heads, "q_len", "k_len"))]

    def outputs(self, p: Any) -> list[TensorSpec]:
        if bias_only(p):
            return [TensorSpec("bias", (1, p.heads, "q_len", "k_len"))]
        return super().outputs(p)

    def reference(self, p: Any, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        if bias_only(p):
            return self.position_bias(p, np.asarray(feeds["q_positions"]), np.asarray(feeds["k_positions"]))[None]
        return super().reference(p, feeds)

    def torch_module(self, p: Any, opts: BuildOptions) -> torch.nn.Module:
        if bias_only(p):
            return BiasOnlyModule(self.position_module(p), opts.dtype.torch)
        return ScoresPlusBias(self.position_module(p))

    def script_functions(self, p: Any, opts: BuildOptions, op: Any) -> list[Any]:
        tables = list(self.tables(p, opts).arrays)
        if bias_only(p):
            core, *callees = self.position_functions(p, op)
            names = ["q_positions", "k_positions"]
            return [cast_once_entry(self.entry + "Only", names, tables, core, names + tables, opts.dtype, op, add=False), core, *callees]
        core, *callees = self.bias_functions(p, op)
        entry = cast_once_entry(self.entry, ["scores"], tables, core, ["scores", *tables], opts.dtype, op)
        return [entry, core, *callees]

    def feeds(self, p: Any, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        a = case.axes
        if bias_only(p):
            return default_positions(a["q_len"], a["k_len"])
        return {"scores": random_normal(rng, (a["batch"], p.heads, a["q_len"], a["k_len"]), dtype)}

    def cases(self, p: Any, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        # A bias-only graph has no batch axis: one batch size is enough.
        cases = attention_cases(seqs, (1,) if bias_only(p) else batches, decode_k=self.decode_keys(p))
        return self.within_limits(p, cases, seqs, batches)

    def decode_keys(self, p: Any) -> int:
        """Keys of the decode step in the default sweep."""
        return 5000

    def example_axes(self, p: Any) -> dict[str, int]:
        # k_len > q_len, as in a prefill chunk after a cache: the export must not tie the two axes.
        return {"batch": 2, "q_len": 3, "k_len": 7}

    def properties(self, p: Any) -> list[Property]:
        return self.bias_properties(p, bias_of_output if bias_only(p) else props.bias_of_additive(p.heads))
