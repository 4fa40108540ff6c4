"""RoPE frequency scalings (docs/encodings.md, RoPE › Scalings): each one small function with one signature.

A scaling maps (rotary_dim d, base b, the rope parameters, the run-time length) to the float64 inverse
frequencies and the attention factor that multiplies cos and sin. The torch module, the onnxscript
function and the reference all take their frequencies from here. Each scaling's function is registered
beside the parameters it requires and allows, so that parameter validation and config import
(posexport.rope.config) share one list, and beside the graph-side cos/sin source it needs
(posexport.rope.sources: two-level tables, stacked regimes, or in-graph dynamic frequencies) and the
length L0 where it switches regime or band. Adding a scaling is one function and one SCALINGS entry.

Two scalings depend on the run-time length seq_len = max(position_ids) + 1 (over the whole batch):
`dynamic` (the base grows continuously past max_positions) and `longrope` (short or long factors, switched
at original_max_positions). The graphs compute that decision on every call; ``seq_len`` here is the same
number, for the reference and for building the tables of each regime.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MissingParam
from ..params import check
from ..tables import plain_inv_freq

# A value of each parameter a scaling requires, shown when one is missing (Llama-3.1's, and a LongRoPE pair's start).
EXAMPLES = {"factor": "8", "original_max_positions": "8192", "low_freq_factor": "1", "high_freq_factor": "4",
            "short_factor": "1.0,1.0,…", "long_factor": "1.0,1.5,…"}

# Every rope parameter that belongs to some scaling; a scaling that does not use one rejects it.
SCALING_PARAMS = (
    "factor",
    "original_max_positions",
    "low_freq_factor",
    "high_freq_factor",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "attention_factor",
    "truncate",
    "short_factor",
    "long_factor",
    "proportion",
)


def default(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    return plain_inv_freq(dim, base), 1.0


def linear(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """Position interpolation: θ_i / s."""
    return plain_inv_freq(dim, base) / p.factor, 1.0


def ntk(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """Static NTK-aware: base b' = b·s^(d/(d−2))."""
    return plain_inv_freq(dim, base * p.factor ** (dim / (dim - 2))), 1.0


def dynamic_ratio(factor: float, seq_len: int | None, max_positions: int) -> float:
    """(s·L/Lmax) − (s−1) with L = max(seq_len, Lmax), written as 1 + s·(L − Lmax)/Lmax so that it is
    exactly 1 (plain RoPE) up to Lmax."""
    length = max(seq_len or 0, max_positions)
    return 1.0 + factor * (length - max_positions) / max_positions


def dynamic(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """Dynamic NTK: b' = b·((s·L/Lmax) − (s−1))^(d/(d−2)), L = max(seq_len, Lmax)."""
    ratio = dynamic_ratio(p.factor, seq_len, p.max_positions)
    return plain_inv_freq(dim, base * ratio ** (dim / (dim - 2))), 1.0


def yarn_mscale(s: float, m: float = 1.0) -> float:
    """g(s, m) = 0.1·m·ln s + 1 for s > 1, else 1."""
    return 0.1 * m * math.log(s) + 1.0 if s > 1 else 1.0


def yarn_attention_factor(p: Any) -> float:
    if p.attention_factor is not None:
        return p.attention_factor
    if p.mscale and p.mscale_all_dim:
        return yarn_mscale(p.factor, p.mscale) / yarn_mscale(p.factor, p.mscale_all_dim)
    return yarn_mscale(p.factor)


def yarn_ramp(dim: int, base: float, p: Any) -> np.ndarray:
    """ramp_i ∈ [0, 1]: 0 keeps θ_i (high frequencies), 1 interpolates to θ_i/s (low frequencies)."""
    original = p.original_max_positions or p.max_positions

    def corr(rotations: float) -> float:
        return dim * math.log(original / (2 * math.pi * rotations)) / (2 * math.log(base))

    low, high = corr(32.0 if p.beta_fast is None else p.beta_fast), corr(1.0 if p.beta_slow is None else p.beta_slow)
    if p.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    return np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)


def yarn(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """inv_freq_i = (θ_i/s)·ramp_i + θ_i·(1 − ramp_i), attention factor g(s, mscale)/g(s, mscale_all_dim)."""
    theta = plain_inv_freq(dim, base)
    ramp = yarn_ramp(dim, base, p)
    return theta / p.factor * ramp + theta * (1 - ramp), yarn_attention_factor(p)


def llama3(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """Wavelength bands: short wavelengths keep θ_i, long ones get θ_i/s, the middle is blended."""
    theta = plain_inv_freq(dim, base)
    original, s = p.original_max_positions, p.factor
    wavelength = 2 * math.pi / theta
    gamma = (original / wavelength - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor)
    blended = (1 - gamma) * theta / s + gamma * theta
    out = np.where(wavelength > original / p.low_freq_factor, theta / s, blended)
    return np.where(wavelength < original / p.high_freq_factor, theta, out), 1.0


def original_or_trained(p: Any) -> int:
    """L0, the pre-scaling context: original_max_positions, or max_positions when it is not given."""
    return p.original_max_positions or p.max_positions


def longrope_attention_factor(p: Any) -> float:
    if p.attention_factor is not None:
        return p.attention_factor
    s = p.max_positions / original_or_trained(p)
    return math.sqrt(1 + math.log(s) / math.log(original_or_trained(p))) if s > 1 else 1.0


def longrope_is_long(p: Any, seq_len: int | None) -> bool:
    return seq_len is not None and seq_len > original_or_trained(p)


def longrope(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """inv_freq_i = 1/(f_i·b^(2i/d)), f = long_factor when seq_len > L0, else short_factor."""
    f = np.asarray(p.long_factor if longrope_is_long(p, seq_len) else p.short_factor, dtype=np.float64)
    return plain_inv_freq(dim, base) / f, longrope_attention_factor(p)


def proportional(dim: int, base: float, p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """Gemma-4: the first k = ⌊proportion·d/2⌋ frequencies keep θ_i = b^(−2i/d) (exponents over the whole
    rotary width), the other d/2 − k are 0 (their pairs pass unturned); all divided by s (default 1)."""
    theta = plain_inv_freq(dim, base)
    turning = int(proportion_of(p) * dim // 2)
    theta[turning:] = 0.0
    return theta / (p.factor or 1.0), 1.0


def proportion_of(p: Any) -> float:
    """The fraction of frequencies that turn: transformers' default 1 when the block gives none."""
    return 1.0 if p.proportion is None else p.proportion


def check_proportional(p: Any) -> None:
    check(0 < proportion_of(p) <= 1, "proportion", p.proportion, "the proportional scaling needs a number in (0, 1]")


def check_base_exponent(p: Any) -> None:
    check(p.rotary_dim > 2, "rotary_dim", p.rotary_dim, f"the {p.scaling} scaling needs rotary_dim > 2 (its exponent is d/(d−2))")


def check_llama3(p: Any) -> None:
    check(p.high_freq_factor > p.low_freq_factor, "high_freq_factor", p.high_freq_factor,
          f"the llama3 scaling needs it > low_freq_factor={p.low_freq_factor}")


def check_yarn(p: Any) -> None:
    fast, slow = 32.0 if p.beta_fast is None else p.beta_fast, 1.0 if p.beta_slow is None else p.beta_slow
    check(fast > slow, "beta_fast", fast, f"the yarn scaling needs it > beta_slow={slow}")


def check_longrope(p: Any) -> None:
    n = p.rotary_dim // 2
    for name in ("short_factor", "long_factor"):
        values = getattr(p, name)
        check(len(values) == n and all(math.isfinite(v) and v > 0 for v in values), name,
              ",".join(f"{v:g}" for v in values), f"the longrope scaling needs rotary_dim/2 = {n} positive numbers")


ScalingFn = Callable[[int, float, Any, "int | None"], tuple[np.ndarray, float]]


def no_switch(p: Any) -> int | None:
    return None


def trained_length(p: Any) -> int:
    return p.max_positions


def original_length(p: Any) -> int | None:
    return p.original_max_positions


# The graph-side cos/sin sources a scaling may declare (posexport.rope.sources builds each one):
TABLES = "tables"  # fixed frequencies: one set of two-level tables
REGIMES = "regimes"  # two frequency sets, tables stacked; the call's seq_len > switch(p) picks the second
DYNAMIC = "dynamic"  # frequencies formed in float64 inside the graph from the call's seq_len


@dataclass(frozen=True)
class Scaling:
    """A scaling's function with the parameters it needs and those it also accepts, the graph-side
    cos/sin source it needs, and the length L0 where it changes regime or bands (None: nowhere)."""

    compute: ScalingFn
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    check: Callable[[Any], None] | None = None
    source: str = TABLES
    switch: Callable[[Any], int | None] = no_switch

    @property
    def accepted(self) -> tuple[str, ...]:
        return self.required + self.optional


SCALINGS: dict[str, Scaling] = {
    "default": Scaling(default),
    "linear": Scaling(linear, ("factor",)),
    "ntk": Scaling(ntk, ("factor",), check=check_base_exponent),
    "dynamic": Scaling(dynamic, ("factor",), check=check_base_exponent, source=DYNAMIC, switch=trained_length),
    "yarn": Scaling(
        yarn,
        ("factor",),
        ("original_max_positions", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate"),
        check=check_yarn,
        switch=original_or_trained,
    ),
    "llama3": Scaling(
        llama3, ("factor", "original_max_positions", "low_freq_factor", "high_freq_factor"), check=check_llama3,
        switch=original_length,
    ),
    "longrope": Scaling(
        longrope, ("short_factor", "long_factor"), ("original_max_positions", "attention_factor"),
        check=check_longrope, source=REGIMES, switch=original_or_trained,
    ),
    "proportional": Scaling(proportional, (), ("proportion", "factor"), check=check_proportional),
}


def is_set(value: Any) -> bool:
    return value is not None and value != ()


def validate(p: Any) -> None:
    """Each scaling takes its own parameters and no others; values are checked once they apply."""
    spec = SCALINGS[p.scaling]
    for name in SCALING_PARAMS:
        value = getattr(p, name)
        if is_set(value) and name not in spec.accepted:
            takes = ", ".join("--" + n.replace("_", "-") for n in spec.accepted) or "no scaling parameters"
            check(False, name, value, f"does not apply to the {p.scaling} scaling, which takes {takes}")
        if name in spec.required and not is_set(value):
            raise MissingParam(name, f"--scaling {p.scaling}", EXAMPLES[name])
    for name in ("factor", "low_freq_factor", "beta_fast", "beta_slow", "attention_factor"):
        value = getattr(p, name)
        check(value is None or (math.isfinite(value) and value > 0), name, value, "must be a finite number > 0")
    for name in ("mscale", "mscale_all_dim"):  # 0 is transformers' "not given": the attention factor is then g(s, 1)
        value = getattr(p, name)
        check(value is None or (math.isfinite(value) and value >= 0), name, value, "must be a finite number ≥ 0")
    if p.low_freq_factor is not None:
        check(math.isfinite(p.high_freq_factor), "high_freq_factor", p.high_freq_factor, "must be a finite number")
    if p.original_max_positions is not None:
        check(1 <= p.original_max_positions <= p.max_positions, "original_max_positions", p.original_max_positions,
              f"must be in [1, max_positions={p.max_positions}]")
    if spec.check:
        spec.check(p)
    check_frequencies(p)


# Below this angle cos rounds to 1 in float32 (1 − θ²/2 is within half a float32 step of 1).
CONSTANT_ANGLE = 2.0 ** -12


def check_frequencies(p: Any) -> None:
    """Finite but absurd bases and factors: refused when the frequencies are not finite in float32 up to
    position_limit, or when at most one pair's angles ever reach CONSTANT_ANGLE (every other cos table constant)."""
    name = "factor" if p.factor is not None else "base"
    value = getattr(p, name)
    try:
        inv_freq, factor = frequencies(p)
    except (OverflowError, ZeroDivisionError, ValueError):
        inv_freq, factor = np.array([math.inf]), math.inf
    largest = float(np.max(inv_freq)) * max(p.position_limit - 1, 1)
    if not (np.all(np.isfinite(inv_freq)) and math.isfinite(factor) and largest < float(np.finfo(np.float32).max)):
        check(False, name, value, "gives frequencies or angles past float32's range; no table can hold them")
    rotating = int(np.sum(inv_freq * max(p.position_limit - 1, 1) >= CONSTANT_ANGLE))
    check(rotating > min(1, inv_freq.size - 1), name, value,
          f"leaves {rotating} of {inv_freq.size} frequency pairs rotating up to position {p.position_limit}: the "
          f"others' angles stay below {CONSTANT_ANGLE:.1e} rad, so their cos tables are constant 1")


def frequencies(p: Any, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """(inv_freq float64 [rotary_dim/2], attention factor) for rope params p at run-time length seq_len."""
    return SCALINGS[p.scaling].compute(p.rotary_dim, p.base, p, seq_len)


def source_of(p: Any) -> str:
    """The graph-side cos/sin source the parameters' scaling needs: TABLES, REGIMES or DYNAMIC."""
    return SCALINGS[p.scaling].source


def decided_per_call(scaling: str) -> bool:
    """Whether a scaling's frequencies depend on the call's length (a frozen table of it is wrong)."""
    return SCALINGS[scaling].source != TABLES


def switch_length(p: Any) -> int | None:
    """The length L0 at which a scaling changes regime or bands (None for plain, linear and ntk)."""
    return SCALINGS[p.scaling].switch(p)


def steady_span(p: Any) -> int:
    """Positions [0, span) over which the frequencies do not depend on the call's length: below the
    switch for a scaling decided per call (dynamic, longrope), the whole graph's range otherwise."""
    spec = SCALINGS[p.scaling]
    return spec.switch(p) if spec.source != TABLES else p.position_limit
