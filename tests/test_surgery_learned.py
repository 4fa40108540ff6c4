"""`posexport patch --extend-learned N --strategy mean|interpolate` on torch.onnx exports of tiny GPT-2, OPT,
BERT, RoBERTa and Whisper-decoder models: the rows of positions below the old limit are kept bit for bit
(mean), the new rows follow the strategy's formula (written here in numpy), and the patched model runs
where the original raises, agreeing with transformers' own model given the same grown table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh
import pytest
from typer.testing import CliRunner

from posexport import surgery
from posexport.errors import PosexportError

from . import learned_fixtures as lf
from .harness import normalised_error

pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

GROWN = 64  # positions after the patch (the tables hold lf.LIMIT = 32)
OFFSETS = {"gpt2": 0, "opt": 2, "bert": 0, "roberta": 2, "whisper-decoder": 0}


def exported(kind: str) -> Path:
    return lf.whisper_decoder() if kind == "whisper-decoder" else lf.export(kind)


def patched(kind: str, strategy: str) -> Path:
    out = lf.ROOT / f"grown-{kind}-{strategy}.onnx"
    if not out.is_file():
        surgery.patch_file(exported(kind), out, extension=surgery.Extension(GROWN, strategy))
    return out


def run(model: Path, seq: int) -> np.ndarray:
    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, lf.feeds(model, seq))[0]


def table(model: Path) -> np.ndarray:
    (site,) = surgery.find(model)
    return onh.to_array(next(t for t in onnx.load(str(model)).graph.initializer if t.name == site.recovered["table"]))


def mean_rows(old: np.ndarray, rows: int) -> np.ndarray:
    return np.concatenate([old, np.tile(old.mean(axis=0, dtype=np.float64), (rows - len(old), 1))])


def interpolated_rows(old: np.ndarray, rows: int) -> np.ndarray:
    """Position interpolation: new row j is old linearly interpolated at x = j·M/N (old[M] := old[M − 1])."""
    x = np.arange(rows) * len(old) / rows
    return np.stack([np.interp(x, np.arange(len(old)), old[:, c].astype(np.float64)) for c in range(old.shape[1])], axis=1)


@pytest.mark.parametrize("kind", list(OFFSETS))
def test_doctor_reads_the_offset_and_the_limit(kind):
    (site,) = surgery.doctor(exported(kind))["sites"]
    rows = lf.LIMIT + OFFSETS[kind]
    assert site["kind"] == "learned-table" and site["recovered"]["rows"] == rows and site["recovered"]["width"] == 32
    assert site["recovered"]["offset"] == OFFSETS[kind] and site["recovered"]["positions"] == lf.LIMIT
    assert [(f["fault"], f["value"]) for f in site["faults"]] == [("position-limit", lf.LIMIT)]


@pytest.mark.parametrize("kind", list(OFFSETS))
def test_mean_keeps_outputs_below_the_old_limit_and_runs_past_it(kind):
    original, grown = exported(kind), patched(kind, "mean")
    for seq in (5, lf.LIMIT):
        assert np.array_equal(run(original, seq), run(grown, seq))  # bit for bit
    with pytest.raises(Exception, match="Gather|Expand"):
        run(original, lf.LIMIT + 1)
    assert run(grown, GROWN).shape[1] == GROWN and np.isfinite(run(grown, GROWN)).all()
    old, new = table(original), table(grown)
    offset = OFFSETS[kind]
    assert np.array_equal(new[:offset], old[:offset])
    assert np.array_equal(new[offset:], mean_rows(old[offset:], GROWN).astype(np.float32))
    (site,) = surgery.doctor(grown)["sites"]
    assert site["faults"] == [] and "position limit 64" in site["notes"][0]


@pytest.mark.parametrize("kind", ["gpt2", "opt"])
def test_interpolate_resamples_every_row(kind):
    old, new = table(exported(kind)), table(patched(kind, "interpolate"))
    offset = OFFSETS[kind]
    assert np.array_equal(new[:offset], old[:offset])
    error = np.max(np.abs(new[offset:] - interpolated_rows(old[offset:], GROWN)))
    assert error <= 4e-7 * np.max(np.abs(old)), error  # float32 rounding of the float64 rows
    assert np.array_equal(new[offset::2], old[offset:])  # N = 2M: every other row is an old one, bit for bit
    assert not np.array_equal(run(exported(kind), 8), run(patched(kind, "interpolate"), 8))


@pytest.mark.parametrize("strategy", ["mean", "interpolate"])
def test_grown_gpt2_agrees_with_transformers_given_the_grown_table(strategy):
    import torch

    model, _ = lf.model_of("gpt2")
    grown = patched("gpt2", strategy)
    model.transformer.wpe = torch.nn.Embedding.from_pretrained(torch.from_numpy(table(grown).copy()))
    feeds = lf.feeds(grown, GROWN)
    with torch.no_grad():
        ref = model.eval()(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
    out = ort.InferenceSession(str(grown)).run(None, feeds)[0]
    assert normalised_error(out, ref) < 1e-5


def test_what_cannot_grow_is_refused_and_nothing_is_written(tmp_path):
    with pytest.raises(PosexportError, match="--extend-learned 32: must be more than the table's 32 rows"):
        surgery.patch_file(exported("opt"), tmp_path / "out.onnx", extension=surgery.Extension(32))
    model = onnx.load(str(exported("bert")))
    token_types = next(n for n in model.graph.node if n.op_type == "Constant" and n.output[0].endswith("Constant_7_output_0"))
    types = onh.to_array(token_types.attribute[0].t).copy()
    assert types.shape == (1, lf.LIMIT) and not types.any()  # BERT's all-zero token-type buffer
    surgery.patch(model, extension=surgery.Extension(GROWN))  # grows
    types[0, 5] = 1
    token_types.attribute[0].t.CopyFrom(onh.from_array(types))
    with pytest.raises(PosexportError, match="GatherElements node '/m/embeddings/GatherElements' gathers by the positions from a buffer"):
        surgery.patch(model, extension=surgery.Extension(GROWN))
    with pytest.raises(PosexportError, match="--strategy 'cubic': choose one of mean, interpolate"):
        surgery.Extension(GROWN, "cubic")
    assert list(tmp_path.iterdir()) == []


def test_cli_extends_and_refuses_a_model_without_a_table(tmp_path):
    from posexport_cli.main import app

    runner = CliRunner()
    out = tmp_path / "grown.onnx"
    done = runner.invoke(app, ["patch", str(exported("whisper-decoder")), "--out", str(out), "--extend-learned", "64"])
    assert done.exit_code == 0, done.output
    assert "learned-table" in done.output and run(out, GROWN).shape[1] == GROWN
    from .surgery_fixtures import t5_encoder_export

    refused = runner.invoke(app, ["patch", str(t5_encoder_export()), "--out", str(tmp_path / "t5.onnx"), "--extend-learned", "64"])
    assert isinstance(refused.exception, PosexportError)  # main() prints it as one `error:` line and exits 2
    assert str(refused.exception).startswith("--extend-learned 64: the model has no learned position table")
    assert not (tmp_path / "t5.onnx").exists()


def test_the_public_api_extends_like_the_cli(tmp_path):
    import posexport

    done = posexport.patch(exported("opt"), tmp_path / "opt.onnx", extend_learned=GROWN, strategy="interpolate")
    assert [(e["kind"], e["params"]) for e in done.describe()] == [("learned-table", {"rows": GROWN, "strategy": "interpolate"})]
    assert np.array_equal(table(tmp_path / "opt.onnx"), table(patched("opt", "interpolate")))
