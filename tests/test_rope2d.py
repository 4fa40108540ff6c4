"""rope-2d: the axial rotation checked against complex multiplication, both artifacts on onnxruntime and
the ONNX reference evaluator in every dtype, the RoPE properties (scores depend only on the 2-D offset,
norms kept) on runtime outputs, grids past the tables raising, bad parameters."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posexport.encodings.rope2d import reference
from posexport.registry import get_encoding

from .conftest import artifact, posexport_cli, session
from .encoding_checks import check_bad_params, check_cases_and_properties

HALF = dict(head_dim=16, heads=2, max_grid=64)
INTERLEAVED = dict(head_dim=24, heads=3, pair_layout="interleaved", base=100.0, max_grid=64)
DTYPES = ["float32", "float16", "bfloat16"]
RUNTIMES = ["ort-cpu", "reference"]
BUILDS = [(d, "script") for d in DTYPES] + [("float32", "torch")] + [pytest.param(d, "torch", marks=pytest.mark.slow) for d in DTYPES[1:]]


def complex_rope2d(x: np.ndarray, base: float, pair_layout: str) -> np.ndarray:
    """Each half of the channels as complex numbers z_i = a_i + i·b_i, multiplied by e^{i·p·θ_i} with
    θ_i = base^(−4i/head_dim) and p the row index (first half) or the column index (second half)."""
    _, h, w, _, d = x.shape
    half, n = d // 2, d // 4
    theta = base ** (-4.0 * np.arange(n) / d)
    out = np.empty_like(x, dtype=np.float64)
    for part, (positions, axis) in enumerate(((np.arange(h), 1), (np.arange(w), 2))):
        block = x[..., part * half : (part + 1) * half].astype(np.float64)
        if pair_layout == "half":
            z = block[..., :n] + 1j * block[..., n:]
        else:
            z = block[..., 0::2] + 1j * block[..., 1::2]
        shape = [1, 1, 1, 1, n]
        shape[axis] = len(positions)
        z = z * np.exp(1j * positions[:, None] * theta).reshape(shape)
        rotated = np.concatenate([z.real, z.imag], -1) if pair_layout == "half" else np.stack([z.real, z.imag], -1).reshape(block.shape)
        out[..., part * half : (part + 1) * half] = rotated
    return out


@pytest.mark.parametrize("config", [HALF, INTERLEAVED], ids=["half", "interleaved"])
def test_reference_is_complex_rotation(config, rng):
    p = get_encoding("rope-2d").params(**config)
    x = rng.standard_normal((2, 5, 7, p.heads, p.head_dim))
    np.testing.assert_allclose(reference(p, {"x": x}), complex_rope2d(x, p.base, p.pair_layout), rtol=0, atol=1e-12)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype, source", BUILDS)
def test_parity_and_properties(dtype, source, runtime):
    check_cases_and_properties(artifact("rope-2d", dtype=dtype, source=source, **HALF), runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("source", ["script", "torch"])
def test_interleaved_pairs(source, runtime):
    check_cases_and_properties(artifact("rope-2d", source=source, **INTERLEAVED), runtime)


@pytest.mark.parametrize("runtime", ["ort-cpu", "reference", "torch"])
@pytest.mark.parametrize("source", ["script", "torch"])
def test_grid_past_the_tables_raises(source, runtime, rng):
    art = artifact("rope-2d", source=source, **HALF)
    assert session(art, runtime).run({"x": rng.standard_normal((1, 2, 64, 2, 16)).astype(np.float32)}).shape == (1, 2, 64, 2, 16)
    for h, w in ((65, 1), (1, 65)):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": rng.standard_normal((1, h, w, 2, 16)).astype(np.float32)})


@pytest.mark.parametrize(
    "values, needle",
    [(dict(head_dim=6), "--head-dim 6"), (dict(head_dim=18), "--head-dim 18"), (dict(heads=0), "--heads 0"),
     (dict(base=0.5), "--base 0.5"), (dict(pair_layout="zigzag"), "--pair-layout 'zigzag'")],
)
def test_bad_parameters_name_themselves(values, needle):
    check_bad_params("rope-2d", values, needle)


def test_cli_build(tmp_path):
    posexport_cli("build", "--encoding", "rope-2d", "--head-dim", "32", "--heads", "4", "--pair-layout", "interleaved",
                  "--out", str(tmp_path), check=True)
    manifest = json.loads((tmp_path / "rope-2d.json").read_text())
    assert manifest["inputs"] == [{"name": "x", "dims": ["batch", "grid_h", "grid_w", 4, 32], "dtype": "float32"}]
    assert manifest["params"]["pair_layout"] == "interleaved"
