"""Random inputs and parity sweeps shared by the encodings (inputs are random and never zero)."""

from __future__ import annotations

import math

import numpy as np

from .. import limits
from ..dtypes import DType
from ..errors import PosexportError
from ..contract import Case

def random_normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Standard normal values in the I/O dtype, with exact zeros nudged away so no input is 0. An input
    past the size cap is refused (posexport.limits): sweeps are checked up front, this catches the rest
    (bench runs, property checks)."""
    tail = limits.over(math.prod(shape) * limits.FLOAT64)
    if tail:
        raise PosexportError(f"an input of shape {list(shape)} would take {tail}; use shorter --seqs or smaller --batches")
    values = rng.standard_normal(shape)
    values[values == 0] = 0.5
    return values.astype(dtype.numpy)


def positions(rng: np.random.Generator, batch: int, seq: int, case: Case) -> np.ndarray:
    """position_ids [batch, seq]: start + arange, or a random offset in [0, start] per row (ragged)."""
    starts = rng.integers(0, case.start + 1, size=(batch, 1)) if case.ragged else np.full((batch, 1), case.start)
    return (starts + np.arange(seq)[None, :]).astype(np.int64)


DEFAULT_SEQS = (1, 2, 17, 512, 4096)
DEFAULT_BATCHES = (1, 3)


def affordable(seqs: tuple[int, ...], batches: tuple[int, ...]) -> list[tuple[int, int]]:
    """Every (seq, batch) but sequences over 512 at batch > 1: long ones run once, at batch 1, which
    keeps sweeps affordable (an attention bias grows as seq²)."""
    return [(seq, batch) for seq in seqs for batch in batches if batch <= 1 or seq <= 512]


def sequence_cases(
    trained: int,
    limit: int,
    seqs: tuple[int, ...] | None = None,
    batches: tuple[int, ...] | None = None,
) -> list[Case]:
    """The parity sweep for position-indexed encodings: every (seq, batch) from the start and at random
    offsets, then past the trained length, past the cached fine rows, and decode steps far out."""
    # The default lengths a graph covers (a short position_limit drops the longer ones); asked-for ones as asked.
    seqs = seqs or tuple(seq for seq in DEFAULT_SEQS if seq <= limit)
    batches = batches or DEFAULT_BATCHES
    out: list[Case] = []
    for seq, batch in affordable(seqs, batches):
        out.append(Case(f"seq{seq}-b{batch}", {"batch": batch, "seq": seq}))
        if seq < limit:
            out.append(Case(f"seq{seq}-b{batch}-offsets", {"batch": batch, "seq": seq}, start=min(1000, limit - seq), ragged=True))
    short = min(seqs)
    top = max(b for b in batches)
    tail = min(17, limit)
    past_trained = max(0, min(trained + 1, limit - tail))
    out.append(Case(f"past-trained@{past_trained}", {"batch": top, "seq": tail}, start=past_trained))
    far = max(0, min(100_000, limit - tail))
    out.append(Case(f"far@{far}", {"batch": top, "seq": tail}, start=far, ragged=True))
    for pos in sorted({min(3000, limit - 1), limit - 1}):
        step = min(max(1, short), pos + 1)
        out.append(Case(f"decode@{pos}", {"batch": top, "seq": step}, start=pos - step + 1))
    return out


def grid_cases(
    trained: tuple[int, int],
    limit: int,
    sides: tuple[int, ...] | None = None,
    batches: tuple[int, ...] | None = None,
) -> list[Case]:
    """The parity sweep for grid encodings (axes batch, grid_h, grid_w): the trained grid at every batch
    size, then 1×1, non-square grids both ways, a grid larger than trained and the tallest and widest
    grids the graph covers (``limit`` rows or columns). ``sides`` replaces these by square grids."""
    batches = batches or DEFAULT_BATCHES
    top = max(batches)
    gh, gw = trained
    if sides:
        shapes = [(s, s) for s in sides]
    else:
        edge = min(limit, 1024)
        shapes = [(1, 1), (3, 5), (5, 3), (min(gh + 3, limit), min(gw + 7, limit)), (edge, 2), (2, edge)]
    out = [Case(f"trained{gh}x{gw}-b{b}", {"batch": b, "grid_h": gh, "grid_w": gw}) for b in batches]
    for h, w in dict.fromkeys(shapes):
        out.append(Case(f"grid{h}x{w}-b{top}", {"batch": top, "grid_h": h, "grid_w": w}))
    return out


ATTENTION_SEQS = (1, 2, 17, 300, 512)


def attention_cases(
    seqs: tuple[int, ...] | None = None,
    batches: tuple[int, ...] | None = None,
    decode_k: int = 5000,
) -> list[Case]:
    """The parity sweep for attention biases (queries are the last q_len of k_len keys): square
    prefills, a prefill chunk after a cache, and a decode step (q_len 1) against decode_k keys."""
    seqs = seqs or ATTENTION_SEQS
    batches = batches or DEFAULT_BATCHES
    out = [Case(f"q{seq}-k{seq}-b{batch}", {"batch": batch, "q_len": seq, "k_len": seq}) for seq, batch in affordable(seqs, batches)]
    top = max(batches)
    out.append(Case(f"chunk-q7-k{max(seqs) + 7}", {"batch": top, "q_len": 7, "k_len": max(seqs) + 7}))
    out.append(Case(f"decode-q1-k{decode_k}", {"batch": top, "q_len": 1, "k_len": decode_k}))
    return out
