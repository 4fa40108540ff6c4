"""Random valid rope parameters and shapes: the built graph agrees with the oracle on two runtimes."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posexport import export
from posexport.rope.encoding import reference
from posexport.runtimes import get_runtime

from .harness import normalised_error


@st.composite
def rope_setups(draw):
    head_dim = 2 * draw(st.integers(1, 40))
    params = dict(
        head_dim=head_dim,
        heads=draw(st.integers(1, 5)),
        rotary_dim=2 * draw(st.integers(1, head_dim // 2)),
        base=draw(st.floats(1.5, 1e6)),
        pair_layout=draw(st.sampled_from(["half", "interleaved"])),
        layout=draw(st.sampled_from(["bshd", "bhsd"])),
        max_positions=draw(st.integers(1, 70_000)),
    )
    dtype = draw(st.sampled_from(["float32", "float16", "bfloat16"]))
    batch, seq = draw(st.integers(1, 3)), draw(st.integers(1, 40))
    start = draw(st.integers(0, 131_072 - seq - 50))  # rows are offset by up to 49 below
    return params, dtype, batch, seq, start, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rope_setups())
def test_random_rope_graphs_match_the_oracle(setup):
    params, dtype, batch, seq, start, seed = setup
    art = export.build("rope", params, dtype=dtype, backend="portable")
    p = art.params
    rng = np.random.default_rng(seed)
    shape = (batch, seq, p.heads, p.head_dim) if p.layout == "bshd" else (batch, p.heads, seq, p.head_dim)
    x = rng.uniform(0.1, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    feeds = {"x": x.astype(art.options.dtype.numpy), "position_ids": start + rng.integers(0, 50, (batch, 1)) + np.arange(seq)}
    ref = reference(p, feeds)
    bound = art.options.dtype.bound(int(feeds["position_ids"].max()))
    for runtime in ("ort-cpu", "reference"):
        out = get_runtime(runtime).load(art).run(feeds)
        assert normalised_error(out, ref) <= bound, runtime
