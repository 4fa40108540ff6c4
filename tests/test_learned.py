"""Learned absolute table (docs/encodings.md): trained tables from .npy, .safetensors and torch state dicts, the
seeded N(0, 0.02) table, both artifacts on onnxruntime CPU and the reference evaluator in every dtype,
positions past the table raising on every runtime, bad parameters, the CLI."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from posexport import export
from posexport.contract import Case
from posexport.encodings.learned import LearnedParams, build_learned_table
from posexport.errors import PosexportError
from posexport.registry import get_encoding

from .conftest import artifact, posexport_cli, session
from .encoding_checks import DTYPES, RUNTIMES, check_feeds, cli_build

LEARNED = get_encoding("learned")
CONFIG = dict(d_model=48, max_positions=600)
# (batch, seq, start, ragged): from 0, per-row offsets, the whole table, its last rows, a decode step at the end.
CASES = [(1, 1, 0, False), (3, 17, 500, True), (1, 600, 0, False), (2, 17, 583, False), (3, 1, 599, False)]


def test_seeded_table_is_n_0_002_and_reproducible():
    table = build_learned_table(LearnedParams(d_model=256, max_positions=1024, seed=7))
    assert table.shape == (1024, 256)
    assert abs(table.mean()) < 1e-3 and abs(table.std() - 0.02) < 5e-4
    np.testing.assert_array_equal(table, build_learned_table(LearnedParams(d_model=256, max_positions=1024, seed=7)))
    assert not np.array_equal(table, build_learned_table(LearnedParams(d_model=256, max_positions=1024, seed=8)))


def write(path, table: np.ndarray, key: str | None) -> None:
    if path.suffix == ".npy":
        np.save(path, table)
    elif path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file({key: table, "wte.weight": np.ones((4, 4), np.float32)}, str(path))
    else:
        torch.save({key: torch.from_numpy(table), "wte.weight": torch.ones(4, 4)}, path)


@pytest.mark.parametrize("suffix, key", [(".npy", None), (".safetensors", "wpe.weight"), (".pt", "transformer.wpe.weight")])
def test_trained_table_is_added_exactly(suffix, key, tmp_path, rng):
    """y = x + W[position_ids] with W the file's table, checked directly against W."""
    table = rng.standard_normal((40, 16)).astype(np.float32)
    path = tmp_path / f"wpe{suffix}"
    write(path, table, key)
    art = export.build("learned", {"weights": str(path), "key": key})
    assert (art.params.max_positions, art.params.d_model) == (40, 16)
    assert art.manifest["params"]["weights_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    pos = rng.integers(0, 40, size=(2, 7))
    for runtime in RUNTIMES:
        out = session(art, runtime).run({"x": x, "position_ids": pos})
        np.testing.assert_array_equal(out, x + table[pos])  # one float32 add: exact
    assert export.build("learned", {"weights": str(path), "key": key}).model_bytes == art.model_bytes


def run_cases(art, runtime: str, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    for batch, seq, start, ragged in CASES:
        feeds = LEARNED.feeds(art.params, Case("t", {"batch": batch, "seq": seq}, start=start, ragged=ragged), art.options.dtype, rng)
        check_feeds(art, runtime, feeds)


@pytest.fixture(scope="module")
def cli_torch_float16(tmp_path_factory):
    """The float16 torch artifact, built by the CLI."""
    return cli_build(tmp_path_factory.mktemp("learned"), "learned", "--d-model", "48", "--max-positions", "600",
                     "--source", "torch", "--dtype", "float16")


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("source", ["script", "torch"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_parity(dtype, source, runtime, request):
    if (source, dtype) == ("torch", "float16"):
        art = request.getfixturevalue("cli_torch_float16")
    else:
        art = artifact("learned", dtype=dtype, source=source, **CONFIG)
    run_cases(art, runtime)


def test_default_sweep_stays_inside_the_table():
    p = LEARNED.params(**CONFIG)
    cases = LEARNED.cases(p)
    assert cases and all(c.start + c.axes["seq"] <= 600 for c in cases)
    assert any(c.start + c.axes["seq"] == 600 for c in cases)


@pytest.mark.parametrize("runtime", ["ort-cpu", "ort-cpu-noopt", "reference", "torch"])
@pytest.mark.parametrize("source", ["script", "torch"])
def test_positions_past_the_table_raise(source, runtime, rng):
    """Never a silent wrap or clamp: 600, −1 and far positions are errors at run time."""
    art = artifact("learned", source=source, **CONFIG)
    x = rng.standard_normal((1, 2, 48)).astype(np.float32)
    check_feeds(art, runtime, {"x": x, "position_ids": np.array([[598, 599]])})
    for bad in ([[599, 600]], [[-1, 0]], [[0, 10_000]]):
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(art, runtime).run({"x": x, "position_ids": np.array(bad)})


def test_bad_parameters_name_the_parameter(tmp_path, rng):
    np.save(tmp_path / "w.npy", rng.standard_normal((32, 8)))
    np.save(tmp_path / "w3.npy", rng.standard_normal((2, 32, 8)))
    torch.save({"a": torch.ones(32, 8), "b": torch.ones(2)}, tmp_path / "w.pt")
    w = str(tmp_path / "w.npy")
    for values, needle in [
        (dict(d_model=0), "--d-model 0"),
        (dict(max_positions=0), "--max-positions 0"),
        (dict(weights=w, d_model=16), "expected [*, 16]"),
        (dict(weights=w, max_positions=64), "expected [64, *]"),
        (dict(weights=str(tmp_path / "w3.npy")), "--weights"),
        (dict(weights=str(tmp_path / "nope.npy")), "--weights"),
        (dict(weights=str(tmp_path / "w.pt")), "--key"),
        (dict(weights=str(tmp_path / "w.pt"), key="c"), "--key c"),
        (dict(key="wpe.weight"), "--key"),
        (dict(weights=w, weights_sha256="0" * 64), "changed since the build"),
        (dict(weights=w, extend_to=32), "--extend-to 32"),
        (dict(extend_strategy="nearest"), "--extend-strategy 'nearest'"),
    ]:
        with pytest.raises(PosexportError) as info:
            LEARNED.params(**values)
        assert needle in str(info.value) and "\n" not in str(info.value), (values, str(info.value))


def test_cli_build_script_with_weights(tmp_path, rng):
    table = rng.standard_normal((50, 8)).astype(np.float32)
    torch.save({"pos.weight": torch.from_numpy(table), "other": torch.ones(3)}, tmp_path / "w.pt")
    posexport_cli("build", "--encoding", "learned", "--weights", "w.pt", "--key", "pos.weight", "--out", "g", cwd=tmp_path, check=True)
    art = export.load(tmp_path / "g" / "learned.onnx")
    assert art.manifest["params"]["weights"] == str((tmp_path / "w.pt").resolve()) and art.manifest["params"]["max_positions"] == 50
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    pos = rng.integers(0, 50, (2, 5))
    np.testing.assert_array_equal(session(art, "ort-cpu").run({"x": x, "position_ids": pos}), x + table[pos])


def test_cli_build_torch(cli_torch_float16):
    m = cli_torch_float16.manifest
    assert (m["source"], m["dtype"]) == ("torch", "float16") and list(m["tables"].values()) == [[600, 48]]
    assert m["params"]["seed"] == 0 and m["params"]["weights"] is None
