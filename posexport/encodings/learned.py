"""Learned absolute position embedding (docs/encodings.md): y = x + table[position_ids].

    table: [rows, d_model]   row p is the embedding of position p; rows = extend_to or max_positions

The table is a trained one (`--weights FILE [--key NAME]`: .npy, .safetensors or a torch state dict) or,
without weights, N(0, 0.02) drawn with a fixed seed. `--extend-to N --extend-strategy mean|interpolate`
(what `posexport extend` sets) grows it as posexport.extend describes. There is nothing to compute past
the table: a position ≥ rows (or negative) makes the runtime raise, never wrap or clamp.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from onnxscript import script

from ..contract import BuildOptions, Case, Tables
from ..dtypes import COMPUTE
from ..errors import PosexportError
from .. import limits
from ..params import check, check_choices, check_seed, param
from ..script import POSEXPORT
from ..weights import load_table, pin_params
from .guards import OUT_OF_RANGE, name_nodes
from .inputs import DEFAULT_BATCHES, DEFAULT_SEQS, affordable
from .kinds.rows import AdditiveRows

DEFAULT_D_MODEL = 768
DEFAULT_MAX_POSITIONS = 1024
INIT_STD = 0.02


# --- extending a trained table to more rows (`posexport extend`) ------------------------------

STRATEGIES = ("mean", "interpolate")


def extend_table(table: np.ndarray, rows: int, strategy: str) -> np.ndarray:
    """The table [M, D] extended to [rows, D] (rows > M) in float64, by ``strategy`` (see the module doc)."""
    table = np.asarray(table, dtype=np.float64)
    old = table.shape[0]
    if strategy not in STRATEGIES:
        raise PosexportError(f"--strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    check_rows(rows, old)
    if strategy == "mean":
        return np.concatenate([table, np.broadcast_to(table.mean(axis=0), (rows - old, table.shape[1]))])
    scaled = np.arange(rows, dtype=np.int64) * old  # x·N = j·M, exact
    lo = scaled // rows
    frac = ((scaled % rows) / rows)[:, None]
    hi = np.minimum(lo + 1, old - 1)
    return (1.0 - frac) * table[lo] + frac * table[hi]


def check_rows(rows: int, current: int, cols: int = 1) -> None:
    """``posexport extend --to ROWS``: more rows than the table has, within the size cap."""
    if rows <= current:
        raise PosexportError(f"--to {rows}: must be more than the table's {current} rows")
    tail = limits.over(rows * cols * limits.FLOAT64)
    if tail:
        raise PosexportError(f"--to {rows}: the extended table would take {tail}")


@dataclass(frozen=True)
class LearnedParams:
    d_model: int | None = param(None, f"channels of x; default {DEFAULT_D_MODEL}, or the columns of --weights")
    max_positions: int | None = param(None, f"rows of the trained table; default {DEFAULT_MAX_POSITIONS}, or the rows of --weights")
    weights: str | None = param(None, "trained table (max_positions × d_model, or 1 × max_positions × d_model): .npy, "
                                      ".safetensors or a torch state dict (.pt/.pth/.bin)")
    key: str | None = param(None, "name of the table inside --weights (safetensors or state dict)")
    weights_sha256: str | None = param(None, "sha256 of --weights; recorded from the file, and checked when given")
    seed: int = param(0, f"seed of the N(0, {INIT_STD}) table used without --weights")
    row_offset: int = param(0, "rows of --weights before position 0's, left out of the graph (OPT's table keeps 2)")
    extend_to: int | None = param(None, "rows after extending the table (posexport extend); > max_positions")
    extend_strategy: str = param("mean", "how extension makes new rows (see posexport extend)", STRATEGIES)

    def __post_init__(self) -> None:
        check_seed(self)
        check_choices(self)
        check(isinstance(self.row_offset, int) and self.row_offset >= 0, "row_offset", self.row_offset, "must be ≥ 0")
        if pin_params(self):
            expected = None if self.max_positions is None else self.max_positions + self.row_offset
            rows, cols = trained_table(self.weights, self.key, self.weights_sha256, expected, self.d_model).shape
            check(rows > self.row_offset, "row_offset", self.row_offset, f"must be less than the table's {rows} rows")
            object.__setattr__(self, "max_positions", rows - self.row_offset)
            object.__setattr__(self, "d_model", cols)
        else:
            check(self.row_offset == 0, "row_offset", self.row_offset, "only means something with --weights")
            for name, default in (("d_model", DEFAULT_D_MODEL), ("max_positions", DEFAULT_MAX_POSITIONS)):
                if getattr(self, name) is None:
                    object.__setattr__(self, name, default)
        check(isinstance(self.d_model, int) and self.d_model >= 1, "d_model", self.d_model, "must be ≥ 1")
        check(isinstance(self.max_positions, int) and self.max_positions >= 1, "max_positions", self.max_positions, "must be ≥ 1")
        if self.extend_to is not None:
            check(self.extend_to > self.max_positions, "extend_to", self.extend_to,
                  f"must be more than the table's max_positions={self.max_positions} rows")
        rows = ("extend_to", self.extend_to) if self.extend_to is not None else ("max_positions", self.max_positions)
        limits.check_product([rows, ("d_model", self.d_model)], "the table")

    @property
    def rows(self) -> int:
        """Positions the graph covers: 0 … rows − 1."""
        return self.extend_to or self.max_positions


@functools.lru_cache(maxsize=8)
def trained_table(path: str, key: str | None, digest: str, rows: int | None, cols: int | None) -> np.ndarray:
    """The float64 table of a weights file, its shape checked; cached per file content (digest)."""
    table = load_table(path, key)
    if table.ndim == 3 and table.shape[0] == 1:  # a [1, rows, d_model] parameter (AST's, MGP-STR's)
        table = table[0]
    if table.ndim != 2 or any(w is not None and w != a for w, a in zip((rows, cols), table.shape)):
        want = ", ".join("*" if w is None else str(w) for w in (rows, cols))
        raise PosexportError(f"--weights {path}: table has shape {list(table.shape)}, expected [{want}] (or [1, {want}])")
    table.setflags(write=False)
    return table


# --- pure functions: the table and the float64 oracle ----------------------------------------------


def build_learned_table(p: LearnedParams) -> np.ndarray:
    """The [rows, d_model] table in float64: trained or seeded, then extended if asked."""
    if p.weights is not None:
        table = trained_table(p.weights, p.key, p.weights_sha256, p.max_positions + p.row_offset, p.d_model)[p.row_offset :]
    else:
        table = np.random.default_rng(p.seed).normal(0.0, INIT_STD, size=(p.max_positions, p.d_model))
    return table if p.extend_to is None else extend_table(table, p.extend_to, p.extend_strategy)


def reference(p: LearnedParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    x = np.asarray(feeds["x"]).astype(np.float64)
    pos = np.asarray(feeds["position_ids"])
    if pos.size and (pos.min() < 0 or pos.max() >= p.rows):
        raise PosexportError(f"position_ids: learned table has rows 0 … {p.rows - 1}; got {pos.min()} … {pos.max()}")
    return x + build_learned_table(p)[pos]


# --- torch ------------------------------------------------------------------------------------------


class LearnedEmbedding(torch.nn.Module):
    """Holds the table as a buffer; forward(x, position_ids) -> x + table[position_ids]."""

    def __init__(self, p: LearnedParams):
        super().__init__()
        self.register_buffer("table", torch.from_numpy(build_learned_table(p).astype(COMPUTE.numpy)), persistent=False)
        self.rows = p.rows

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        # A negative position is sent past the table, so the lookup fails instead of wrapping.
        safe = torch.where(position_ids < 0, self.rows, position_ids)
        pe = torch.nn.functional.embedding(safe, self.table)
        return (x.to(torch.float32) + pe).to(x.dtype)


# --- onnxscript -------------------------------------------------------------------------------------


def learned_functions(rows: int, op: Any) -> list[Any]:
    """posexport.LearnedRows(position_ids, table) -> table rows in float32; the kind wraps it in the entry
    posexport.LearnedPositions(x, position_ids, table) -> y."""

    @script(POSEXPORT, default_opset=op)
    def LearnedRows(position_ids, table):
        # Gather raises on an index ≥ rows; negatives would wrap, so they are sent to rows as well.
        negative = op.Less(position_ids, op.Constant(value_int=0))
        safe = op.Where(negative, op.Constant(value_int=rows), position_ids)
        return op.Gather(table, safe)

    return [name_nodes(LearnedRows, "Gather", OUT_OF_RANGE)]


def table_cases(rows: int, seqs: tuple[int, ...] | None, batches: tuple[int, ...] | None) -> list[Case]:
    """Sequences that fit the table, from 0 and at random offsets, plus the last rows and a decode step
    at the last position."""
    seqs = tuple(s for s in (seqs or DEFAULT_SEQS) if s <= rows) or (rows,)
    batches = batches or DEFAULT_BATCHES
    out: list[Case] = []
    for seq, batch in affordable(seqs, batches):
        out.append(Case(f"seq{seq}-b{batch}", {"batch": batch, "seq": seq}))
        if seq < rows:
            out.append(Case(f"seq{seq}-b{batch}-offsets", {"batch": batch, "seq": seq}, start=rows - seq, ragged=True))
    tail = min(17, rows)
    top = max(batches)
    out.append(Case(f"last-rows@{rows - tail}", {"batch": top, "seq": tail}, start=rows - tail))
    out.append(Case(f"decode@{rows - 1}", {"batch": top, "seq": 1}, start=rows - 1))
    return out


# --- the encoding -----------------------------------------------------------------------------------


class LearnedEncoding(AdditiveRows):
    name = "learned"
    entry = "LearnedPositions"
    Params = LearnedParams
    oracle = staticmethod(reference)
    Module = LearnedEmbedding

    def tables(self, p: LearnedParams, opts: BuildOptions) -> Tables:
        return Tables({"table": build_learned_table(p).astype(COMPUTE.numpy)})

    def row_functions(self, p: LearnedParams, op: Any) -> list[Any]:
        return learned_functions(p.rows, op)

    def position_limit(self, p: LearnedParams) -> int:
        return p.rows

    def cases(self, p: LearnedParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return self.within_limits(p, table_cases(p.rows, seqs, batches), seqs, batches)


ENCODING = LearnedEncoding()
