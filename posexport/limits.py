"""Upper limits on what a build or a parity sweep may allocate (docs/limits.md).

Sizes come from the user (``--heads``, ``--seqs``, a manifest, a config.json), so each encoding estimates
the bytes its tables, example inputs and sweep would take before allocating them, and refuses past a cap
with one line naming the parameter: 2 GiB by default, changed with the environment variable
POSEXPORT_MAX_BYTES (a byte count, or with a K, M, G or T suffix: ``POSEXPORT_MAX_BYTES=16G``).
Estimates are Python integers, so a size of 10**15 cannot overflow on the way.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

from .errors import ParamError, PosexportError

ENV = "POSEXPORT_MAX_BYTES"
DEFAULT_MAX_BYTES = 2 << 30
FLOAT64 = 8  # the reference computes in float64: the widest copy of any value posexport holds
# A build's torch export traces example inputs of a few tokens ([2, 3, ...]); the property checks feed a few
# more. Sizes are checked for this many tokens of every input, in float64.
EXAMPLE_TOKENS = 64
# A parity case holds its feeds and the runtime's output in the I/O dtype, and the float64 reference
# with its temporaries: about this many float64 copies of every input and output in all.
WORKING_COPIES = 2
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def max_bytes() -> int:
    """The cap in bytes: POSEXPORT_MAX_BYTES when set, else 2 GiB."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    match = re.fullmatch(r"(\d{1,16})\s*([KMGT]?)(?:i?B)?", raw, flags=re.IGNORECASE)
    if not match or int(match[1]) == 0:
        raise PosexportError(f"{ENV}={raw!r}: expected a positive byte count such as 4294967296 or 4G")
    return int(match[1]) * UNITS[match[2].upper()]


def human(nbytes: int) -> str:
    """1536 -> '1.5 KiB'; sizes past the units read as a power of two."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:.3g} {unit}" if value < 1024 else f"2^{math.log2(nbytes):.0f} bytes"
    return f"{nbytes} bytes"


def over(nbytes: int) -> str | None:
    """The refusal's tail when ``nbytes`` is past the cap, else None."""
    cap = max_bytes()
    if nbytes <= cap:
        return None
    return f"about {human(nbytes)}, over the {human(cap)} limit on what posexport allocates (set {ENV} to raise it)"


def check_bytes(name: str, value: object, nbytes: int, what: str) -> None:
    """Refuse, naming parameter ``name``, when ``what`` would take ``nbytes`` past the cap:
    ``--heads 1000000000000000: one token of x would take about 2^63 bytes, over the 2 GiB limit …``."""
    tail = over(nbytes)
    if tail:
        raise ParamError(name, value, f"{what} would take {tail}")


def check_allocation(subject: object, what: str, nbytes: int) -> None:
    """Refuse, naming ``subject`` (a file, an input, an option with its value), when ``what`` would
    allocate ``nbytes`` past the cap: ``--weights t.npy: reading its int8 table [262144, 8192] and widening
    it to float64 would take about 18 GiB, over the 2 GiB limit …``."""
    tail = over(nbytes)
    if tail:
        raise PosexportError(f"{subject}: {what} would take {tail}")


def check_product(factors: Sequence[tuple[str, int]], what: str, itemsize: int = FLOAT64) -> None:
    """check_bytes for an array of prod(factors) items, naming the largest factor (the one most likely
    mistyped) when several sizes multiply."""
    name, value = max(factors, key=lambda f: f[1])
    check_bytes(name, value, math.prod(v for _, v in factors) * itemsize, what)


def check_tokens(factors: Sequence[tuple[str, int]], what: str = "x") -> None:
    """One token's values (heads × head_dim, d_model, …), for EXAMPLE_TOKENS tokens in float64."""
    check_product(factors, f"{EXAMPLE_TOKENS} tokens of {what}", itemsize=FLOAT64 * EXAMPLE_TOKENS)


def check_two_level(name: str, value: int, frequencies: int, limit: int, regimes: int = 1) -> None:
    """Two-level cos/sin tables (docs/numerics.md) for ``limit`` positions: about 3·sqrt(limit) rows of
    ``frequencies`` values, cos and sin, per regime, built in float64; refused naming ``name``."""
    rows = 3 * math.isqrt(max(limit, 1)) + 2
    check_bytes(name, value, rows * frequencies * 2 * regimes * FLOAT64, "the cos/sin tables")
