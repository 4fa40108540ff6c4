"""Extending a learned table (docs/encodings.md, `posexport extend`): mean and interpolate against hand values,
the original rows untouched where the strategy promises it, weights files kept in their format and
dtype, extended graphs that run and raise past their new end, sources never modified."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from posexport import export
from posexport.errors import PosexportError
from posexport.extend import extend_file, extend_table, extend_weights

from .conftest import posexport_cli, session


def test_mean_keeps_every_original_row_and_appends_their_mean(rng):
    table = rng.standard_normal((7, 5))
    out = extend_table(table, 10, "mean")
    assert out.shape == (10, 5)
    np.testing.assert_array_equal(out[:7], table)
    for row in out[7:]:
        np.testing.assert_allclose(row, table.sum(axis=0) / 7, rtol=0, atol=1e-15)


def test_interpolate_by_hand():
    # New row j reads the old table at j·M/N: 3 → 6 rows reads 0, .5, 1, 1.5, 2, 2.5 (the last row held).
    table = np.array([[0.0, 1.0], [10.0, 3.0], [20.0, -1.0]])
    np.testing.assert_allclose(extend_table(table, 6, "interpolate"),
                               [[0, 1], [5, 2], [10, 3], [15, 1], [20, -1], [20, -1]], rtol=0, atol=1e-15)
    # 3 → 5 rows reads 0, .6, 1.2, 1.8, 2.4.
    np.testing.assert_allclose(extend_table(table, 5, "interpolate")[:, 0], [0, 6, 12, 18, 20], rtol=0, atol=1e-12)


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_interpolate_keeps_original_rows_at_integer_factors(factor, rng):
    table = rng.standard_normal((11, 6))
    out = extend_table(table, 11 * factor, "interpolate")
    np.testing.assert_array_equal(out[::factor], table)  # bit for bit, not merely close


@pytest.mark.parametrize("rows, strategy, needle", [(7, "mean", "--to 7"), (3, "interpolate", "--to 3"), (9, "nearest", "--strategy 'nearest'")])
def test_bad_requests(rows, strategy, needle, rng):
    with pytest.raises(PosexportError, match=needle):
        extend_table(rng.standard_normal((7, 2)), rows, strategy)


def test_weights_files_keep_format_dtype_and_other_tensors(tmp_path, rng):
    from safetensors.numpy import load_file, save_file

    table = rng.standard_normal((6, 4)).astype(np.float32)
    np.save(tmp_path / "w.npy", table.astype(np.float16))
    save_file({"wpe": table, "wte": np.arange(6, dtype=np.int32)}, str(tmp_path / "w.safetensors"))
    torch.save({"wpe": torch.from_numpy(table).to(torch.bfloat16), "wte": torch.ones(2)}, tmp_path / "w.pt")

    npy = np.load(io.BytesIO(extend_weights(tmp_path / "w.npy", 9, "mean", None)))
    assert npy.dtype == np.float16 and npy.shape == (9, 4)
    np.testing.assert_array_equal(npy[:6], table.astype(np.float16))

    from safetensors.numpy import load

    st = load(extend_weights(tmp_path / "w.safetensors", 12, "interpolate", "wpe"))
    assert st["wpe"].dtype == np.float32 and st["wpe"].shape == (12, 4)
    np.testing.assert_array_equal(st["wpe"][::2], table)
    np.testing.assert_array_equal(st["wte"], np.arange(6, dtype=np.int32))

    pt = torch.load(io.BytesIO(extend_weights(tmp_path / "w.pt", 8, "mean", "wpe")), weights_only=True)
    assert pt["wpe"].dtype == torch.bfloat16 and pt["wpe"].shape == (8, 4)
    assert torch.equal(pt["wpe"][:6], torch.from_numpy(table).to(torch.bfloat16)) and torch.equal(pt["wte"], torch.ones(2))

    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    (written,) = extend_file(tmp_path / "w.safetensors", 12, "interpolate", key="wpe", out=tmp_path / "out")
    assert written == tmp_path / "out" / "w-12.safetensors"
    assert load_file(str(written))["wpe"].shape == (12, 4)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    again = extend_weights(tmp_path / "w.safetensors", 12, "interpolate", "wpe")
    assert written.read_bytes() == again  # deterministic


def test_extend_never_overwrites_its_source(tmp_path, rng):
    np.save(tmp_path / "w.npy", rng.standard_normal((4, 2)))
    with pytest.raises(PosexportError, match="--name w"):
        extend_file(tmp_path / "w.npy", 8, "mean", name="w")


def test_cli_extends_a_learned_graph(tmp_path, rng):
    """`posexport extend GRAPH`: the first rows answer exactly as before, the new ones are the mean, the
    new end raises, and the source graph is untouched."""
    table = rng.standard_normal((30, 8)).astype(np.float32)
    np.save(tmp_path / "wpe.npy", table)
    art = export.build("learned", {"weights": str(tmp_path / "wpe.npy")}, dtype="float16")
    export.save(art, tmp_path)
    before = (tmp_path / "learned.onnx").read_bytes(), (tmp_path / "learned.json").read_bytes()
    proc = posexport_cli("extend", str(tmp_path / "learned.onnx"), "--to", "45", "--strategy", "mean", check=True)
    assert "learned-45.onnx" in proc.stdout
    assert ((tmp_path / "learned.onnx").read_bytes(), (tmp_path / "learned.json").read_bytes()) == before
    longer = export.load(tmp_path / "learned-45.onnx")
    assert longer.manifest["params"]["extend_to"] == 45 and longer.manifest["dtype"] == "float16"
    assert longer.manifest["tables"] == {"table": [45, 8]}
    x = rng.standard_normal((2, 30, 8)).astype(np.float16)
    pos = np.tile(np.arange(30), (2, 1))
    for runtime in ("ort-cpu", "reference"):
        np.testing.assert_array_equal(session(longer, runtime).run({"x": x, "position_ids": pos}),
                                      session(art, runtime).run({"x": x, "position_ids": pos}))
        new = session(longer, runtime).run({"x": x[:, :15], "position_ids": pos[:, :15] + 30})
        expected = (x[:, :15].astype(np.float64) + table.astype(np.float64).mean(axis=0)).astype(np.float16)
        np.testing.assert_allclose(new.astype(np.float64), expected.astype(np.float64), rtol=0, atol=4e-3)
        with pytest.raises(Exception, match=r"(?i)out of|bounds|index"):
            session(longer, runtime).run({"x": x[:, :1], "position_ids": np.array([[45], [0]])})


def test_extending_an_extended_graph_resamples_the_original(tmp_path):
    art = export.build("learned", {"d_model": 4, "max_positions": 10, "extend_to": 15, "extend_strategy": "interpolate"})
    export.save(art, tmp_path, "g")
    (onnx_path, _) = extend_file(tmp_path / "g.onnx", 40, "interpolate")
    p = export.load(onnx_path).params
    assert (p.max_positions, p.extend_to, p.extend_strategy) == (10, 40, "interpolate")
    with pytest.raises(PosexportError, match="--to 12"):
        extend_file(tmp_path / "g.onnx", 12, "mean")
    rope = export.build("rope", {"head_dim": 8, "heads": 1})
    export.save(rope, tmp_path)
    with pytest.raises(PosexportError, match="needs a learned graph"):
        extend_file(tmp_path / "rope.onnx", 12, "mean")
