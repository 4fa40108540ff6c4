"""Mathematical properties checked on runtime outputs of a built graph, never on the Python code.

Each check is generic: an encoding builds it in ``properties(p)`` from a small adapter that turns the
runner (feeds -> output of the graph under test) into the quantity the property is about, and the parity
engine runs it on every runtime. Adapters for the common contracts (docs/contract.md) are here too:

    rotations  x [batch, seq, heads, d], position_ids -> y           (rope and its scalings, rope-2d)
    rows       x [batch, seq, D] + PE[position_ids]   -> PE rows     (sinusoidal, learned; sincos-2d's grid rows)
    biases     scores [batch, heads, q_len, k_len]     -> bias       (alibi, t5)
    pairwise   a value for every pair of grid cells    -> by offset  (rope-2d's scores, swin's bias)

Every check returns a PropertyResult whose ``error`` is normalised like the parity error,
max|out − ref| / max(1, max|ref|), with its bound in the detail, so a report can say how far off a
runtime was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..comparison import scale_of
from ..contract import Property, PropertyResult, Runner
from ..dtypes import DType
from .inputs import random_normal

# Property names a runtime may list among its known limitations (runtimes/base.py).
RAISES_PAST_LIMIT = "raises-past-limit"

# (runner, x [batch, seq, heads, d] in the I/O dtype, positions [batch, seq]) -> y [batch, seq, heads, d]
Rotate = Callable[[Runner, np.ndarray, np.ndarray], np.ndarray]
# (runner, positions [n], dtype, rng) -> PE rows [n, D] in float64
Rows = Callable[[Runner, np.ndarray, DType, np.random.Generator], np.ndarray]
# (runner, q_len, k_len, dtype, rng) -> bias [heads, q_len, k_len] in float64 (−inf where masked)
Bias = Callable[[Runner, int, int, DType, np.random.Generator], np.ndarray]
# (runner, dtype, rng) -> (values [N, N, ...] of every pair of N grid cells, offset id [N, N], scale)
Pairwise = Callable[[Runner, DType, np.random.Generator], tuple[np.ndarray, np.ndarray, float]]
# (dtype, rng) -> (feeds, the exact output expected for them)
Expected = Callable[[DType, np.random.Generator], tuple[dict[str, np.ndarray], np.ndarray]]


def normalised(diff: np.ndarray, ref: np.ndarray) -> float:
    """A difference already formed, scaled as every posexport error is (posexport.comparison)."""
    return float(np.max(np.abs(diff), initial=0.0)) / scale_of(ref)


def verdict(error: float, bound: float, what: str) -> PropertyResult:
    ok = bool(np.isfinite(error)) and error <= bound
    return PropertyResult(ok, f"{what}: error {error:.2e} {'≤' if ok else '>'} bound {bound:.1e}", error)


def small_inputs(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """Random inputs of about 1e-3: y − x then carries the rounding of the encoding's values alone."""
    return (random_normal(rng, shape, dtype).astype(np.float64) * 1e-3).astype(dtype.numpy)


# --- adapters ---------------------------------------------------------------------------------------


def rows_of_additive(width: int) -> Rows:
    """PE rows of a graph y = x + PE[position_ids] with x [1, n, width]: y − x, in float64."""

    def rows(runner: Runner, positions: np.ndarray, dtype: DType, rng: np.random.Generator) -> np.ndarray:
        x = small_inputs(rng, (1, len(positions), width), dtype)
        y = runner({"x": x, "position_ids": positions[None].astype(np.int64)})
        return (np.asarray(y).astype(np.float64) - x.astype(np.float64))[0]

    return rows


def rows_of_grid(width: int, extra: Callable[[DType, np.random.Generator], dict[str, np.ndarray]] | None = None) -> Rows:
    """PE rows of a grid graph y = x + PE with x [1, 1, n, width]: row p is PE at grid cell (0, p)."""

    def rows(runner: Runner, positions: np.ndarray, dtype: DType, rng: np.random.Generator) -> np.ndarray:
        x = small_inputs(rng, (1, 1, int(positions.max()) + 1, width), dtype)
        y = runner({"x": x, **(extra(dtype, rng) if extra else {})})
        return (np.asarray(y).astype(np.float64) - x.astype(np.float64))[0, 0][positions]

    return rows


def bias_of_additive(heads: int) -> Bias:
    """The bias of a graph y = scores + bias with scores [1, heads, q_len, k_len]: y − scores."""

    def bias(runner: Runner, q_len: int, k_len: int, dtype: DType, rng: np.random.Generator) -> np.ndarray:
        scores = small_inputs(rng, (1, heads, q_len, k_len), dtype)
        y = np.asarray(runner({"scores": scores})).astype(np.float64)
        with np.errstate(invalid="ignore"):
            return np.where(np.isneginf(y), -np.inf, y - scores.astype(np.float64))[0]

    return bias


# --- rotations (rope) -------------------------------------------------------------------------------


def relative_position(rotate: Rotate, heads: int, dim: int, span: int, tolerance: Callable[[DType, int], float]) -> Property:
    """<R_m q, R_n k> depends only on n − m: shifting every position by one random offset leaves all
    q·k scores unchanged. Positions stay below ``span`` (where the frequencies do not change)."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        seq = 16
        window = min(span - 1, 4096)
        positions = np.sort(rng.choice(window, size=min(seq, window), replace=False))[None]
        seq = positions.shape[1]
        offset = int(rng.integers(1, span - int(positions.max()))) if span - int(positions.max()) > 1 else 0
        q = random_normal(rng, (1, seq, heads, dim), dtype)
        k = random_normal(rng, (1, seq, heads, dim), dtype)

        def scores(pos: np.ndarray) -> np.ndarray:
            rq = np.asarray(rotate(runner, q, pos)).astype(np.float64)
            rk = np.asarray(rotate(runner, k, pos)).astype(np.float64)
            return np.einsum("bihd,bjhd->bhij", rq, rk)

        before, after = scores(positions), scores(positions + offset)
        error = normalised(after - before, before)
        bound = tolerance(dtype, int(positions.max()) + offset)
        return verdict(error, bound, f"scores at positions ≤ {int(positions.max())} vs shifted by {offset}")

    return Property("relative-position", "<R_m q, R_n k> depends only on n − m (shift all positions: scores unchanged)", check)


def norm_preserved(rotate: Rotate, heads: int, dim: int, rotary_dim: int, limit: int, scale: float, tolerance: Callable[[DType, int], float]) -> Property:
    """A rotation keeps the length of every rotated vector, times the attention factor ``scale``."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        positions = rng.integers(0, limit, size=(2, 8))
        x = random_normal(rng, (2, 8, heads, dim), dtype)
        y = np.asarray(rotate(runner, x, positions)).astype(np.float64)
        before = scale * np.linalg.norm(x.astype(np.float64)[..., :rotary_dim], axis=-1)
        after = np.linalg.norm(y[..., :rotary_dim], axis=-1)
        bound = tolerance(dtype, int(positions.max()))
        return verdict(normalised(after - before, before), bound, f"norms at positions up to {int(positions.max())}")

    return Property("norm-preserved", f"|R_p x| = {scale:g}·|x| over the rotated channels", check)


def raises_past_limit(feeds_at: Callable[[np.ndarray, DType, np.random.Generator], dict[str, np.ndarray]], limit: int) -> Property:
    """A position the graph does not cover (≥ limit, or negative) raises, never garbage."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        silent = []
        for bad in (limit, limit + 12345, -1):
            positions = np.array([[0, bad]], dtype=np.int64)
            try:
                runner(feeds_at(positions, dtype, rng))
            except Exception:
                continue
            silent.append(f"position {bad} returned an output")
        if silent:
            return PropertyResult(False, f"no error past the limit {limit}: " + "; ".join(silent), float("inf"))
        return PropertyResult(True, f"positions {limit}, {limit + 12345} and -1 raise")

    return Property(RAISES_PAST_LIMIT, f"positions outside [0, {limit}) raise an error", check)


# --- rows (absolute encodings) ----------------------------------------------------------------------


def bounded(rows: Rows, positions: int, low: float = -1.0, high: float = 1.0) -> Property:
    """Every PE value lies in [low, high] (sinusoids), over positions [0, positions) and far beyond."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        at = np.unique(np.concatenate([np.arange(min(positions, 512)), rng.integers(0, positions, 64)]))
        values = rows(runner, at, dtype, rng)
        over = np.maximum(values - high, 0) + np.maximum(low - values, 0)
        return verdict(float(np.max(over)), dtype.bound(int(at.max())), f"values outside [{low:g}, {high:g}]")

    return Property("bounded", f"every value in [{low:g}, {high:g}]", check)


def unique_rows(rows: Rows, positions: int, sample: int = 1024) -> Property:
    """No two positions of the cached range share a row (up to the dtype's tolerance)."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        at = np.arange(positions) if positions <= sample else np.sort(rng.choice(positions, sample, replace=False))
        r = rows(runner, at, dtype, rng)
        sq = np.sum(r * r, axis=1)
        dist2 = sq[:, None] + sq[None, :] - 2 * r @ r.T
        np.fill_diagonal(dist2, np.inf)
        i, j = np.unravel_index(np.argmin(dist2), dist2.shape)
        closest = float(np.sqrt(max(float(dist2[i, j]), 0.0)))
        # Two rows closer than a few roundings of the I/O dtype cannot be told apart downstream.
        bound = 10 * dtype.tolerance * max(1.0, float(np.max(np.abs(r))))
        ok = closest > bound
        return PropertyResult(ok, f"closest rows: positions {at[i]} and {at[j]} at distance {closest:.2e} ({'>' if ok else '≤'} {bound:.1e})",
                              0.0 if ok else bound - closest)

    return Property("unique-rows", f"rows unique over positions [0, {positions})", check)


# linear_shift fits a width × width map on 2·width + 32 rows and tests it on as many more, at shifts up to 63.
def linear_shift_positions(width: int) -> int:
    """The fewest positions a graph must cover for linear_shift to be checked on it."""
    return 2 * (2 * width + 32) + 63


def linear_shift(rows: Rows, width: int, positions: int, shift: int | None = None) -> Property:
    """PE(p + k) = M_k · PE(p) for one fixed matrix M_k: fitted on some positions, tested on others."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        k = shift or int(rng.integers(1, 64))
        n = 2 * width + 32  # more rows than unknowns, so a fit cannot succeed by counting alone
        at = rng.choice(max(positions - k, n), size=2 * n, replace=positions - k < 2 * n)
        a, b = rows(runner, at, dtype, rng), rows(runner, at + k, dtype, rng)
        m, *_ = np.linalg.lstsq(a[:n], b[:n], rcond=None)
        residual = a[n:] @ m - b[n:]
        bound = 10 * dtype.bound(int(at.max()) + k)
        return verdict(normalised(residual, b[n:]), bound, f"PE(p+{k}) vs the fitted linear map of PE(p) on held-out positions")

    return Property("linear-shift", "PE(p+k) is a fixed linear map of PE(p)", check)


# --- biases (alibi, t5) -----------------------------------------------------------------------------


def query_positions(q_len: int, k_len: int) -> np.ndarray:
    """Queries are the last q_len of the k_len keys (docs/contract.md)."""
    return np.arange(k_len - q_len, k_len)


def linear_in_distance(bias: Bias, q_len: int, k_len: int, symmetric: bool = False, negative: bool = False) -> Property:
    """bias[h, i, j] = c_h · distance(i, j) for one constant per head (each c_h < 0 with ``negative``),
    over the entries whose key is not after the query (every entry when ``symmetric``)."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        b = bias(runner, q_len, k_len, dtype, rng)
        distance = (query_positions(q_len, k_len)[:, None] - np.arange(k_len)[None, :]).astype(np.float64)
        if symmetric:
            distance = np.abs(distance)
        keep = np.broadcast_to(distance >= 0, b.shape)
        if not np.all(np.isfinite(b[keep])):
            return PropertyResult(False, "a non-finite bias where the key is not after the query", float("inf"))
        errors, slopes = [], []
        for h in range(b.shape[0]):
            d, v = distance[keep[h]], b[h][keep[h]]
            slope = float(d @ v) / max(float(d @ d), 1e-300)
            errors.append(normalised(v - slope * d, v))
            slopes.append(slope)
        result = verdict(max(errors), dtype.bound(), f"worst head's residual from a line through 0 ({b.shape[0]} heads)")
        if negative and not all(s < 0 for s in slopes):
            return PropertyResult(False, result.detail + "; a slope is not negative", max(result.error, 1.0))
        return result

    return Property("linear-in-distance", "bias = slope_h · distance for every head", check)


def masked_above_diagonal(bias: Bias, q_len: int, k_len: int) -> Property:
    """Causal: every key after its query is −inf, every other entry finite."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        b = bias(runner, q_len, k_len, dtype, rng)
        future = np.broadcast_to(np.arange(k_len)[None, :] > query_positions(q_len, k_len)[:, None], b.shape)
        unmasked = int(np.sum(~np.isneginf(b[future])))
        masked_past = int(np.sum(~np.isfinite(b[~future])))
        ok = unmasked == 0 and masked_past == 0
        return PropertyResult(ok, f"{unmasked} future entries not −inf, {masked_past} past entries not finite", 0.0 if ok else float("inf"))

    return Property("masked-above-diagonal", "−inf exactly above the diagonal", check)


def monotone_buckets(bias: Bias, length: int, table: np.ndarray | None = None, constant_from: int | None = None) -> Property:
    """T5: the bias depends only on key − query, and along growing |key − query| (each sign apart) the
    bucket never returns to an earlier one. A bucket is the vector of all heads' values at a distance;
    vectors within the dtype's rounding of the values are one bucket, so neighbouring buckets that merge
    in float16/bfloat16 never count as a return. With ``table`` [buckets, heads] every vector must be one
    of its rows, in non-decreasing row order; with ``constant_from`` every distance from it on shares one."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        b = bias(runner, length, length, dtype, rng)
        worst = max(float(np.max(np.ptp(np.stack([np.diagonal(b[h], offset=rp) for h in range(b.shape[0])]), axis=1)))
                    for rp in range(-(length - 1), length)) / scale_of(b)
        problems = [f"bias differs along a diagonal by {worst:.2e}"] if worst > dtype.bound() else []
        same = 4 * dtype.bound() * max(1.0, float(np.max(np.abs(b))))
        sides = {"keys after the query": b[:, 0, :].T, "keys before the query": b[:, length - 1, ::-1].T}  # [n, heads]
        for side, vectors in sides.items():
            problem = bucket_order(vectors, same, table, constant_from)
            if problem:
                problems.append(f"{side}: {problem}")
        return PropertyResult(not problems, "; ".join(problems) or f"monotone over |key − query| < {length}", max(worst, 1.0) if problems else 0.0)

    return Property("monotone-buckets", "buckets monotone in |key − query|, bias relative-only", check)


def bucket_order(vectors: np.ndarray, same: float, table: np.ndarray | None, constant_from: int | None) -> str | None:
    """Why the bucket vectors [n, heads] along one side are not monotone, or None."""
    buckets = table if table is not None else vectors
    gap = np.max(np.abs(buckets[:, None, :] - vectors[None, :, :]), axis=2)  # [buckets, n]
    current, chosen = 0, []
    for n in range(len(vectors)):
        fits = np.flatnonzero(gap[:, n] <= same)
        if len(fits) == 0:
            return f"distance {n} matches no bucket (closest {gap[:, n].min():.2e})"
        later = fits[fits >= current]
        # With a table the buckets are its rows; without one, each distance's own vector is a candidate.
        returned = len(later) == 0 if table is not None else bool(np.any(fits < current))
        if current not in fits and returned:
            return f"an earlier bucket returns at |distance| {n}"
        current = current if current in fits else int(later[0])
        chosen.append(current)
    if constant_from is not None and len(set(chosen[constant_from:])) > 1:
        return f"distances ≥ {constant_from} span several buckets"
    return None


# --- grids (vision) ---------------------------------------------------------------------------------


def relative_2d(pairwise: Pairwise, what: str, bound_factor: float = 1.0) -> Property:
    """A quantity of every pair of grid cells depends only on their 2-D offset: all pairs with one offset
    agree, up to the dtype's bound relative to the adapter's scale."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        values, offset, scale = pairwise(runner, dtype, rng)
        first: dict[int, np.ndarray] = {}
        worst = 0.0
        for a, b in np.ndindex(offset.shape):
            seen = first.setdefault(int(offset[a, b]), values[a, b])
            worst = max(worst, float(np.max(np.abs(values[a, b] - seen))))
        return verdict(worst / scale, bound_factor * dtype.bound(), f"{len(first)} 2-D offsets, worst spread {worst:.3g}")

    return Property("relative-2d", f"{what} depends only on the 2-D offset between grid cells", check)


def bit_exact(name: str, description: str, expected: Expected) -> Property:
    """On the adapter's feeds the output is the expected array bit for bit (no rounding beyond its own)."""

    def check(runner: Runner, p: Any, dtype: DType, rng: np.random.Generator) -> PropertyResult:
        feeds, want = expected(dtype, rng)
        out = np.asarray(runner(feeds)).astype(np.float64)
        want = want.astype(np.float64)
        differ = int(np.count_nonzero(out != want))
        return PropertyResult(differ == 0, f"{differ} of {out.size} values differ", float(np.max(np.abs(out - want))))

    return Property(name, description, check)
