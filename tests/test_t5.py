"""T5 relative bias (docs/encodings.md): buckets against hand values and an independent float32 implementation,
the oracle against a loop, both artifacts on onnxruntime CPU and the reference evaluator in every dtype
(decode steps, distances past max_distance), trained tables, properties, bad parameters, the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posexport import export
from posexport.encodings.t5 import T5Params, reference, relative_bucket
from posexport.errors import PosexportError
from posexport.registry import get_encoding

from .conftest import artifact, session
from .encoding_checks import DTYPES, RUNTIMES, check_attention_shapes, check_bad_params, check_feeds, cli_build, largest_intermediate, torch_build

T5 = get_encoding("t5")
CONFIGS = {
    "encoder": dict(heads=4),
    "decoder": dict(heads=3, bidirectional=False, num_buckets=16, max_distance=40),
}
TORCH_CONFIG = {"float32": "encoder", "float16": "decoder", "bfloat16": "encoder"}
# (batch, q_len, k_len): one token, a square prefill, a chunk after a cache, longer than 2·max_distance,
# and a decode step (q_len 1, k_len 5000) far past max_distance.
SHAPES = [(1, 1, 1), (3, 17, 17), (2, 7, 300), (1, 300, 300), (2, 1, 5000)]


def test_buckets_by_hand():
    # Encoder, 32 buckets, max_distance 128: nb = 16 per direction, max_exact = 8;
    # n ≥ 8: 8 + ⌊ln(n/8)/ln(16)·8⌋, capped at 15 (n = 15: ⌊1.81⌋ = 1; n = 64: exactly 6); keys after the query add 16.
    rp = np.array([0, -1, -7, -8, -15, -16, -31, -32, -127, -128, -10_000, 1, 7, 8, 16, 64, 127, 128, 99_999])
    want = [0, 1, 7, 8, 9, 10, 11, 12, 15, 15, 15, 17, 23, 24, 26, 30, 31, 31, 31]
    np.testing.assert_array_equal(relative_bucket(rp, True, 32, 128), want)
    # Decoder: nb = 32, max_exact = 16, keys after the query all in bucket 0; n ≥ 16: 16 + ⌊ln(n/16)/ln(8)·16⌋.
    rp = np.array([5, 0, -5, -15, -16, -32, -64, -127, -128, -1_000_000])
    np.testing.assert_array_equal(relative_bucket(rp, False, 32, 128), [0, 0, 5, 15, 16, 21, 26, 31, 31, 31])


def hf_bucket(rp: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int) -> torch.Tensor:
    """transformers' T5Attention._relative_position_bucket (float32 logs), restated independently."""
    ret = torch.zeros_like(rp)
    if bidirectional:
        num_buckets //= 2
        ret += (rp > 0).to(torch.long) * num_buckets
        n = torch.abs(rp)
    else:
        n = -torch.min(rp, torch.zeros_like(rp))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return ret + torch.where(is_small, n, large)


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", [
    (True, 32, 128), (False, 32, 128), (True, 64, 256), (False, 2, 3), (True, 4, 7), (False, 10, 50), (True, 12, 20),
])
def test_buckets_match_transformers(bidirectional, num_buckets, max_distance):
    rp = np.arange(-3000, 3001)
    ours = relative_bucket(rp, bidirectional, num_buckets, max_distance)
    np.testing.assert_array_equal(ours, hf_bucket(torch.from_numpy(rp), bidirectional, num_buckets, max_distance).numpy())


def test_reference_equals_a_loop(rng, tmp_path):
    """bias[h, i, j] = table[bucket(j − (k_len − q_len + i)), h], buckets from the transformers restatement."""
    table = rng.standard_normal((8, 2))
    np.save(tmp_path / "t5.npy", table)
    p = T5Params(weights=str(tmp_path / "t5.npy"), max_distance=6)
    assert (p.num_buckets, p.heads) == (8, 2)
    scores = rng.standard_normal((1, 2, 3, 20))
    got = reference(p, {"scores": scores})
    for i in range(3):
        for j in range(20):
            b = int(hf_bucket(torch.tensor(j - (17 + i)), True, 8, 6))
            np.testing.assert_allclose(got[0, :, i, j], scores[0, :, i, j] + table[b], rtol=0, atol=1e-15)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_script_parity(config, dtype, runtime):
    check_attention_shapes(artifact("t5", dtype=dtype, **CONFIGS[config]), runtime, SHAPES)


@pytest.fixture(scope="module")
def cli_torch_float16(tmp_path_factory):
    """The float16 torch artifact (the decoder config), built by the CLI."""
    return cli_build(tmp_path_factory.mktemp("t5"), "t5", "--heads", "3", "--bidirectional", "false", "--num-buckets", "16",
                     "--max-distance", "40", "--source", "torch", "--dtype", "float16")


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_export_parity(dtype, runtime, request):
    check_attention_shapes(torch_build("t5", dtype, request, CONFIGS[TORCH_CONFIG[dtype]]), runtime, SHAPES)


@pytest.mark.parametrize("source", ["script", "torch"])
def test_decode_step_is_the_last_row_and_stays_small(source, rng):
    """q_len 1 at k_len 5000 gives the last row of a longer chunk, and builds nothing larger than its output."""
    art = artifact("t5", source=source, **CONFIGS[TORCH_CONFIG["float32"]])
    scores = rng.standard_normal((1, 4, 5, 5000)).astype(np.float32)
    chunk = session(art, "ort-cpu").run({"scores": scores})
    step = session(art, "ort-cpu").run({"scores": scores[:, :, -1:]})
    np.testing.assert_array_equal(step[:, :, 0], chunk[:, :, -1])
    assert largest_intermediate(art, {"scores": scores[:, :, -1:]}) <= 4 * 5000


def test_bias_table_is_small_and_exact_far_out(rng):
    art = artifact("t5", **CONFIGS["encoder"])
    assert art.manifest["tables"] == {"bias_by_rp": [2 * 128 + 1, 4]}
    feeds = {"scores": rng.standard_normal((1, 4, 3, 20_000)).astype(np.float32)}
    assert check_feeds(art, "ort-cpu", feeds) <= 1e-6


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_trained_table_from_a_state_dict(suffix, tmp_path, rng):
    """The HF layout: relative_attention_bias.weight [num_buckets, heads] under its state-dict key."""
    key = "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    table = rng.standard_normal((32, 6)).astype(np.float32)
    path = tmp_path / f"t5{suffix}"
    if suffix == ".pt":
        torch.save({key: torch.from_numpy(table), "lm_head.weight": torch.ones(3, 3)}, path)
    else:
        from safetensors.numpy import save_file

        save_file({key: table, "lm_head.weight": np.ones((3, 3), np.float32)}, str(path))
    art = export.build("t5", {"weights": str(path), "key": key, "bidirectional": False})
    assert (art.params.heads, art.params.num_buckets) == (6, 32)
    assert art.manifest["params"]["weights_sha256"] and art.manifest["params"]["key"] == key
    scores = rng.standard_normal((2, 6, 1, 700)).astype(np.float32)
    out = session(art, "ort-cpu").run({"scores": scores})
    buckets = hf_bucket(torch.arange(700) - 699, False, 32, 128).numpy()
    np.testing.assert_allclose(out[:, :, 0], scores[:, :, 0] + table[buckets].T, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_buckets_monotone_on_the_graph(config, dtype):
    art = artifact("t5", dtype=dtype, **CONFIGS[config])
    (prop,) = T5.properties(art.params)
    result = prop.check(session(art, "ort-cpu").run, art.params, art.options.dtype, np.random.default_rng(5))
    assert result.ok, result.detail


def test_monotone_check_catches_another_table():
    art = artifact("t5", seed=1, **CONFIGS["encoder"])
    (prop,) = T5.properties(T5Params(**CONFIGS["encoder"]))
    result = prop.check(session(art, "ort-cpu").run, art.params, art.options.dtype, np.random.default_rng(0))
    assert not result.ok and "matches no bucket" in result.detail


@pytest.mark.parametrize("values, needle", [
    (dict(num_buckets=1, bidirectional=False), "--num-buckets 1"),
    (dict(num_buckets=3), "--num-buckets 3"),
    (dict(num_buckets=32, max_distance=16), "--max-distance 16"),
    (dict(num_buckets=8, max_distance=3, bidirectional=False), "--max-distance 3"),
    (dict(heads=0), "--heads 0"),
    (dict(key="relative_attention_bias.weight"), "--key"),
])
def test_bad_parameters_name_the_parameter(values, needle):
    check_bad_params("t5", values, needle)


def test_bad_weights_name_the_parameter(tmp_path, rng):
    np.save(tmp_path / "t.npy", rng.standard_normal((32, 8)))
    torch.save({"a": torch.ones(32, 8), "b": torch.ones(2)}, tmp_path / "t.pt")
    for values, needle in [
        (dict(weights=str(tmp_path / "t.npy"), heads=12), "expected [*, 12]"),
        (dict(weights=str(tmp_path / "missing.npy")), "--weights"),
        (dict(weights=str(tmp_path / "t.pt")), "--key"),
        (dict(weights=str(tmp_path / "t.pt"), key="c"), "--key c"),
        (dict(weights=str(tmp_path / "t.npy"), weights_sha256="0" * 64), "changed since the build"),
    ]:
        with pytest.raises(PosexportError) as info:
            T5.params(**values)
        assert needle in str(info.value) and "\n" not in str(info.value), (values, str(info.value))


def test_cli_build_script(tmp_path, rng):
    art = cli_build(tmp_path, "t5", "--heads", "2", "--num-buckets", "8", "--max-distance", "20")
    assert art.manifest["params"]["num_buckets"] == 8 and art.manifest["params"]["bidirectional"] is True
    check_feeds(art, "ort-cpu", {"scores": rng.standard_normal((1, 2, 4, 90)).astype(np.float32)})


def test_cli_build_torch(cli_torch_float16):
    m = cli_torch_float16.manifest
    assert (m["source"], m["dtype"]) == ("torch", "float16")
    assert {k: m["params"][k] for k in ("heads", "num_buckets", "max_distance", "bidirectional")} == \
        {"heads": 3, "num_buckets": 16, "max_distance": 40, "bidirectional": False}
