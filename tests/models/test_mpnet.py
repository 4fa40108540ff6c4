"""MPNet: its buckets (T5's, bidirectional), the rows and bias its forward adds, misreads failing, other bucket counts
refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import read_model  # noqa: E402
from posexport.models.cli import build as cli_build  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import bias_roles_agree_with_hf  # noqa: E402


def test_mpnet_buckets_are_t5s_bidirectional_on_every_offset():
    """MPNetEncoder.relative_position_bucket (32 buckets, max_distance 128) against the t5 encoding's float64 buckets
    on every relative position in ±200000: equal; the causal buckets (a misread) differ."""
    import torch
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    from posexport.encodings.t5 import relative_bucket
    from posexport.models import mpnet

    offsets = np.arange(-200000, 200001)
    model = MPNetEncoder.relative_position_bucket(torch.from_numpy(offsets)).numpy()
    assert np.array_equal(relative_bucket(offsets, True, mpnet.BUCKETS, mpnet.MAX_DISTANCE), model)
    assert np.mean(relative_bucket(offsets, False, mpnet.BUCKETS, mpnet.MAX_DISTANCE) != model) > 0.4


def mpnet_folder(folder: Path, **overrides) -> Path:
    """A tiny MPNet of its own config, its random position table and bias table in a checkpoint of the base model."""
    zoo.tiny("mpnet", folder, **overrides)
    rng = np.random.default_rng(0)
    config = zoo.config_class("mpnet").from_pretrained(folder)
    save_file({"embeddings.position_embeddings.weight":
               rng.standard_normal((config.max_position_embeddings, config.hidden_size)).astype(np.float32),
               "encoder.relative_attention_bias.weight":
               rng.standard_normal((config.relative_attention_num_buckets, config.num_attention_heads)).astype(np.float32)},
              str(folder / "model.safetensors"))
    return folder


def test_mpnet_roles_are_the_rows_and_bias_its_forward_adds(tmp_path):
    """MPNetModel with the checkpoint's tables, on a forward of 7 tokens then 2 padding tokens: its embeddings add the
    table's rows at the note's position_ids (2 … 8, padding at row 1), a 0-based reading missing them; every layer is
    handed the same bias, the t5 graph's reference on random scores, a causal reading missing it."""
    import torch
    from transformers import MPNetModel

    folder = mpnet_folder(tmp_path / "mpnet")
    model = MPNetModel.from_pretrained(folder).eval()
    added, biases = [], []
    model.embeddings.position_embeddings.register_forward_hook(lambda _m, _a, rows: added.append(rows[0].double().numpy()))
    for layer in model.encoder.layer:
        layer.register_forward_pre_hook(lambda _m, args: biases.append(args[2][0].double().numpy()))
    with torch.no_grad():
        model(input_ids=torch.tensor([[0, 5, 9, 12, 7, 30, 2, 1, 1]]))
    plan = read_model(folder)
    assert [(r.role, r.encoding, r.layers) for r in plan.roles] == [("learned", "learned", ()),
                                                                     ("t5-encoder", "t5", (0, 1, 2, 3))]
    table, bias = plan.roles
    rng = np.random.default_rng(1)
    learned_encoding, x = get_encoding("learned"), rng.standard_normal((1, 9, 64))

    def table_error(positions):
        ours = learned_encoding.reference(learned_encoding.params(**table.values), {"x": x, "position_ids": positions[None]})
        return np.max(np.abs(ours - (x + added[0])))

    assert table_error(np.array([2, 3, 4, 5, 6, 7, 8, 1, 1])) < 1e-6 and table_error(np.arange(9)) > 0.1
    assert len(biases) == 4 and all(np.array_equal(b, biases[0]) for b in biases)
    t5, scores = get_encoding("t5"), rng.standard_normal((1, 4, 9, 9))

    def bias_error(values):
        return np.max(np.abs(t5.reference(t5.params(**values), {"scores": scores}) - (scores + biases[0])))

    assert bias_error(bias.values) < 1e-6 and bias_error({**bias.values, "bidirectional": False}) > 0.1
    bias_roles_agree_with_hf(dataclasses.replace(plan, roles=(bias,)), rng, (2, 4, 300, 300))  # past max_distance too


def test_mpnet_passes_parity_from_model_and_misreads_fail(tmp_path):
    """Both graphs built as a user builds them pass `parity --from-model` against MPNet's own code (the table's
    lookup, MPNetEncoder.compute_position_bias); the bias built causal and the table built to take 0-based
    position_ids (2 rows skipped) fail it in every case."""
    from posexport import export

    folder = mpnet_folder(tmp_path / "mpnet")
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    graphs = sorted((tmp_path / "built").glob("*.onnx"))
    assert [g.name for g in graphs] == ["mpnet-learned.onnx", "mpnet-t5-encoder.onnx"]
    for graph in graphs:
        report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17, 300), batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), bad
    table, bias = read_model(folder).roles
    for encoding, values, name in (("t5", {**bias.values, "bidirectional": False}, "causal"),
                                   ("learned", {**table.values, "max_positions": None, "row_offset": 2}, "zero-based")):
        wrong, _ = export.save(export.build(encoding, values, backend="portable"), tmp_path, name)
        report = run_model_parity(folder, wrong, ["ort-cpu"], seqs=(17, 300), batches=(2,), properties=False)
        statuses = [r.status for r in report.results if r.runtime == "hf"]
        assert statuses and all(s == "fail" for s in statuses), (name, statuses)


def test_mpnet_other_bucket_counts_are_refused_in_one_line(tmp_path):
    folder = mpnet_folder(tmp_path / "mpnet", relative_attention_num_buckets=64)
    with pytest.raises(PosexportError, match="'relative_attention_num_buckets' = 64: MPNetEncoder buckets") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)
