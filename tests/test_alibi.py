"""ALiBi (docs/encodings.md): slopes against hand values, the oracle against a loop, both artifacts on onnxruntime
CPU and the reference evaluator in every dtype, decode steps, properties, bad parameters, the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from posexport.encodings.alibi import AlibiParams, alibi_slopes, reference
from posexport.registry import get_encoding

from .conftest import artifact, session
from .encoding_checks import DTYPES, RUNTIMES, check_attention_shapes, check_bad_params, check_feeds, cli_build, largest_intermediate, torch_build

ALIBI = get_encoding("alibi")
CONFIGS = {"12-causal": dict(heads=12), "20-symmetric": dict(heads=20, causal=False), "8-causal": dict(heads=8)}
# One torch export per dtype (each costs seconds), every config through the onnxscript function; the
# float16 one is built by the CLI.
TORCH_CONFIG = {"float32": "12-causal", "float16": "20-symmetric", "bfloat16": "8-causal"}
# (batch, q_len, k_len): single token, square prefill, chunk after a cache, decode far out.
SHAPES = [(1, 1, 1), (3, 17, 17), (2, 7, 300), (1, 130, 130), (2, 1, 5000)]


def test_slopes_by_hand():
    np.testing.assert_array_equal(alibi_slopes(8), [2.0 ** -k for k in range(1, 9)])
    np.testing.assert_array_equal(alibi_slopes(1), [2.0 ** -8])
    # 12 heads: the 8 slopes of 8 heads, then slopes of 16 heads (2^(−k/2)) at k = 1, 3, 5, 7.
    np.testing.assert_allclose(alibi_slopes(12), [2.0 ** -k for k in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5], rtol=1e-15)
    # 20 heads: 16 slopes 2^(−k/2), then slopes of 32 heads (2^(−k/4)) at k = 1, 3, 5, 7.
    np.testing.assert_allclose(alibi_slopes(20), [2.0 ** (-k / 2) for k in range(1, 17)] + [2 ** -0.25, 2 ** -0.75, 2 ** -1.25, 2 ** -1.75], rtol=1e-15)


@pytest.mark.parametrize("causal", [True, False])
def test_reference_equals_a_loop(causal, rng):
    p = AlibiParams(heads=3, causal=causal)
    scores = rng.standard_normal((2, 3, 4, 9))
    got = reference(p, {"scores": scores})
    slopes = [0.0625, 0.00390625, 0.25]  # 3 heads, m = 2: 2^-4, 2^-8; then slopes(4)[0::2][:1] = 2^-2
    np.testing.assert_array_equal(alibi_slopes(3), slopes)
    for h in range(3):
        for i in range(4):
            q = 9 - 4 + i
            for j in range(9):
                if causal and j > q:
                    assert got[1, h, i, j] == -np.inf
                else:
                    assert got[1, h, i, j] == pytest.approx(scores[1, h, i, j] - slopes[h] * abs(q - j), abs=1e-12)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_script_parity(config, dtype, runtime):
    check_attention_shapes(artifact("alibi", dtype=dtype, **CONFIGS[config]), runtime, SHAPES)


@pytest.fixture(scope="module")
def cli_torch_float16(tmp_path_factory):
    return cli_build(tmp_path_factory.mktemp("alibi"), "alibi", "--heads", "20", "--causal", "false",
                     "--source", "torch", "--dtype", "float16")


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_export_parity(dtype, runtime, request):
    check_attention_shapes(torch_build("alibi", dtype, request, CONFIGS[TORCH_CONFIG[dtype]]), runtime, SHAPES)


@pytest.mark.parametrize("source", ["script", "torch"])
def test_decode_step_never_builds_a_square_table(source, rng):
    """q_len 1 against 5000 keys: no tensor in the graph is larger than the output itself."""
    art = artifact("alibi", source=source, **CONFIGS[TORCH_CONFIG["float32"]])
    feeds = {"scores": rng.standard_normal((1, 12, 1, 5000)).astype(np.float32)}
    assert largest_intermediate(art, feeds) <= 12 * 5000
    full = session(art, "ort-cpu").run({"scores": np.tile(feeds["scores"], (1, 1, 5000, 1))[:, :, -3:]})
    step = session(art, "ort-cpu").run(feeds)
    np.testing.assert_array_equal(step[:, :, 0], full[:, :, -1])  # the decode row is the last row of a chunk


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", ["12-causal", "20-symmetric"])
def test_properties_hold_on_the_graph(config, dtype):
    art = artifact("alibi", dtype=dtype, **CONFIGS[config])
    for prop in ALIBI.properties(art.params):
        result = prop.check(session(art, "ort-cpu").run, art.params, art.options.dtype, np.random.default_rng(3))
        assert result.ok, f"{prop.name}: {result.detail}"


def test_properties_catch_a_wrong_graph():
    """A symmetric graph is not causal; a T5 bias is not linear in distance."""
    symmetric = artifact("alibi", **CONFIGS["20-symmetric"])
    causal_props = {prop.name: prop for prop in ALIBI.properties(AlibiParams(heads=20, causal=True))}
    mask = causal_props["masked-above-diagonal"]
    assert not mask.check(session(symmetric, "ort-cpu").run, symmetric.params, symmetric.options.dtype, np.random.default_rng(0)).ok
    t5 = artifact("t5", heads=12)
    (linear,) = ALIBI.properties(AlibiParams(heads=12, causal=False))
    result = linear.check(session(t5, "ort-cpu").run, t5.params, t5.options.dtype, np.random.default_rng(0))
    assert not result.ok and result.error > 1e-2


@pytest.mark.parametrize("values, needle", [
    (dict(heads=0), "--heads 0"),
    (dict(heads=-3), "--heads -3"),
    (dict(causal="maybe"), "--causal 'maybe'"),
    (dict(slopes=1), "--slopes: no such option (this encoding takes --causal, --heads, --output)"),
])
def test_bad_parameters_name_the_parameter(values, needle):
    check_bad_params("alibi", values, needle)


def test_cli_build_script(tmp_path, rng):
    art = cli_build(tmp_path, "alibi", "--heads", "6", "--causal", "false", "--dtype", "float16")
    assert art.manifest["params"] == {"heads": 6, "causal": False, "output": "scores"} and art.manifest["source"] == "script"
    assert [i["dims"] for i in art.manifest["inputs"]] == [["batch", 6, "q_len", "k_len"]]
    check_feeds(art, "ort-cpu", {"scores": rng.standard_normal((2, 6, 3, 40)).astype(np.float16)})


def test_cli_build_torch(cli_torch_float16):
    m = cli_torch_float16.manifest
    assert m["params"] == {"heads": 20, "causal": False, "output": "scores"} and (m["source"], m["dtype"]) == ("torch", "float16")
    g = cli_torch_float16.model.graph
    assert [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in (*g.input, *g.output)] == [["batch", 20, "q_len", "k_len"]] * 2
