"""sincos-2d: the MAE layout checked against an independent construction, both artifacts on onnxruntime
and the ONNX reference evaluator in every dtype, boundedness on runtime outputs, grids past the tables
raising, bad parameters."""

from __future__ import annotations

import json

import numpy as np
import pytest

from posexport.encodings.sincos2d import build_sincos2d

from .conftest import artifact, posexport_cli, session
from .encoding_checks import check_bad_params, check_cases_and_properties

CONFIG = dict(dim=32, max_grid=64)
DTYPES = ["float32", "float16", "bfloat16"]
RUNTIMES = ["ort-cpu", "reference"]
BUILDS = [(d, "script") for d in DTYPES] + [("float32", "torch")] + [pytest.param(d, "torch", marks=pytest.mark.slow) for d in DTYPES[1:]]


def mae_sincos(h: int, w: int, dim: int) -> np.ndarray:
    """MAE's get_2d_sincos_pos_embed, element by element: channel c < D/2 encodes the column, the rest the
    row; within a half, the first D/4 are sines and the last D/4 cosines of p / 10000^(k/(D/4))."""
    out = np.empty((h, w, dim))
    quarter = dim // 4
    for i in range(h):
        for j in range(w):
            for c in range(dim):
                pos = j if c < dim // 2 else i
                k = c % quarter
                angle = pos / 10000 ** (k / quarter)
                out[i, j, c] = np.sin(angle) if (c % (dim // 2)) < quarter else np.cos(angle)
    return out


@pytest.mark.parametrize("h, w", [(1, 1), (3, 5), (7, 2), (14, 14)])
def test_layout_matches_mae(h, w):
    np.testing.assert_allclose(build_sincos2d(h, w, 16, 10000.0), mae_sincos(h, w, 16), rtol=0, atol=1e-12)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype, source", BUILDS)
def test_parity_every_grid(dtype, source, runtime):
    art = artifact("sincos-2d", dtype=dtype, source=source, **CONFIG)
    check_cases_and_properties(art, runtime, {"bounded"})


@pytest.mark.parametrize("runtime", ["ort-cpu", "reference", "torch"])
@pytest.mark.parametrize("source", ["script", "torch"])
def test_grid_past_the_tables_raises(source, runtime, rng):
    art = artifact("sincos-2d", source=source, **CONFIG)
    assert session(art, runtime).run({"x": rng.standard_normal((1, 64, 2, 32)).astype(np.float32)}).shape == (1, 64, 2, 32)
    for h, w in ((65, 2), (2, 65)):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": rng.standard_normal((1, h, w, 32)).astype(np.float32)})


@pytest.mark.parametrize("values, needle", [(dict(dim=30), "--dim 30"), (dict(dim=0), "--dim 0"), (dict(base=1.0), "--base 1.0"),
                                            (dict(max_grid=0), "--max-grid 0")])
def test_bad_parameters_name_themselves(values, needle):
    check_bad_params("sincos-2d", values, needle)


def test_strided_bfloat16_inputs_reach_onnxruntime_intact(rng):
    """A bfloat16 view with odd strides (a flipped grid) must give what its contiguous copy gives."""
    art = artifact("sincos-2d", dtype="bfloat16", **CONFIG)
    from posexport.dtypes import DTYPES as ALL

    x = rng.standard_normal((1, 6, 5, 32)).astype(ALL["bfloat16"].numpy)[:, ::-1]
    assert not x.flags["C_CONTIGUOUS"]
    run = session(art, "ort-cpu").run
    assert np.array_equal(run({"x": x}).view(np.uint16), run({"x": np.ascontiguousarray(x)}).view(np.uint16))


def test_cli_build(tmp_path):
    posexport_cli("build", "--encoding", "sincos-2d", "--dim", "64", "--dtype", "bfloat16", "--out", str(tmp_path), check=True)
    manifest = json.loads((tmp_path / "sincos-2d.json").read_text())
    assert manifest["inputs"] == [{"name": "x", "dims": ["batch", "grid_h", "grid_w", 64], "dtype": "bfloat16"}]
