"""LayoutLM: the summed tables its embeddings add, misreads failing; LayoutLMv2/v3's buckets as their pending reason
says."""

from __future__ import annotations

import json
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


def layoutlm_folder(folder: Path, **overrides) -> Path:
    """A tiny LayoutLM of its own config, each of its five position tables random (and unlike the others) in a
    checkpoint of the base model."""
    zoo.tiny("layoutlm", folder, max_position_embeddings=40, max_2d_position_embeddings=96, **overrides)
    rng = np.random.default_rng(0)
    save_file({f"embeddings.{table}.weight": rng.standard_normal((rows, 64)).astype(np.float32)
               for table, rows in (("position_embeddings", 40), ("x_position_embeddings", 96), ("y_position_embeddings", 96),
                                   ("h_position_embeddings", 96), ("w_position_embeddings", 96))},
              str(folder / "model.safetensors"))
    return folder


def random_boxes(rng: np.random.Generator, batch: int, seq: int, rows: int) -> np.ndarray:
    """[batch, seq, 4] boxes (left, top, right, bottom), every edge and side within the table's rows, width and
    height unequal."""
    left, top = rng.integers(0, rows // 2, (2, batch, seq))
    width, height = rng.integers(0, rows // 2, (2, batch, seq))
    return np.stack([left, top, left + width, top + height], axis=-1)


def test_layoutlm_roles_sum_to_the_rows_its_embeddings_add(tmp_path):
    """LayoutLMModel with the checkpoint's tables, on random tokens, token types and boxes: the sum its embeddings
    hand to LayerNorm is the word and token_type rows passed through the five graphs' references as the notes say
    (learned at 0 … seq − 1; x at the left then the right edge, y at the top then the bottom, h at the height, w at
    the width); h and w swapped, x at the top edge, y at the right edge, or 1-based position_ids miss it."""
    import torch
    from transformers import LayoutLMModel

    folder = layoutlm_folder(tmp_path / "layoutlm")
    model = LayoutLMModel.from_pretrained(folder).eval()
    summed = []
    model.embeddings.LayerNorm.register_forward_pre_hook(lambda _m, args: summed.append(args[0].double().numpy()))
    rng = np.random.default_rng(1)
    tokens, types = rng.integers(1, 64, (2, 11)), rng.integers(0, 2, (2, 11))
    bbox = random_boxes(rng, 2, 11, 96)
    with torch.no_grad():
        model(input_ids=torch.from_numpy(tokens), bbox=torch.from_numpy(bbox), token_type_ids=torch.from_numpy(types))
        x = (model.embeddings.word_embeddings(torch.from_numpy(tokens))
             + model.embeddings.token_type_embeddings(torch.from_numpy(types))).double().numpy()
    plan = read_model(folder)
    assert [(r.role, r.encoding, r.layers) for r in plan.roles] == [
        ("learned", "learned", ()), ("x-learned", "learned", ()), ("y-learned", "learned", ()), ("h-learned", "learned", ()),
        ("w-learned", "learned", ())]
    encoding = get_encoding("learned")
    params = {r.role: encoding.params(**r.values) for r in plan.roles}
    left, top, right, bottom = np.moveaxis(bbox, -1, 0)
    as_read = [("learned", np.broadcast_to(np.arange(11), (2, 11))), ("x-learned", left), ("y-learned", top),
               ("x-learned", right), ("y-learned", bottom), ("h-learned", bottom - top), ("w-learned", right - left)]

    def error(lookups):
        y = x
        for role, ids in lookups:
            y = encoding.reference(params[role], {"x": y, "position_ids": ids})
        return np.max(np.abs(y - summed[0]))

    assert error(as_read) < 1e-5
    misreads = {"h and w swapped": {5: ("h-learned", right - left), 6: ("w-learned", bottom - top)},
                "x at the top edge": {1: ("x-learned", top)}, "y at the right edge": {4: ("y-learned", right)},
                "1-based position_ids": {0: ("learned", np.broadcast_to(np.arange(1, 12), (2, 11)))}}
    for name, change in misreads.items():
        assert error([change.get(i, lookup) for i, lookup in enumerate(as_read)]) > 0.1, name


def test_layoutlm_passes_parity_from_model_and_misreads_fail(tmp_path):
    """The five graphs built as a user builds them pass `parity --from-model` against the model's own tables; the
    w table's graph judged as the h role, and the y table's as the x role, fail in every case."""
    from posexport import export, verdicts
    from posexport.models.oracle import Hf

    folder = layoutlm_folder(tmp_path / "layoutlm")
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    graphs = sorted((tmp_path / "built").glob("*.onnx"))
    assert [g.name for g in graphs] == [f"layoutlm-{r}.onnx"
                                        for r in ("h-learned", "learned", "w-learned", "x-learned", "y-learned")]
    for graph in graphs:
        report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17, 40), batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), bad
    plan = read_model(folder)
    for built_as, judged_as in (("w-learned", "h-learned"), ("y-learned", "x-learned")):
        wrong = export.build("learned", plan.role(built_as).values, backend="portable")
        report = verdicts.run_parity(wrong, ["ort-cpu", Hf(plan.manifest_entry(plan.role(judged_as)))], seqs=(17, 40),
                                     batches=(2,), properties=False)
        statuses = [r.status for r in report.results if r.runtime == "hf"]
        assert statuses and all(s == "fail" for s in statuses), (built_as, statuses)


def test_layoutlm_relative_position_embeddings_are_refused_in_one_line(tmp_path):
    folder = layoutlm_folder(tmp_path / "layoutlm")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "position_embedding_type": "relative_key"}))
    with pytest.raises(PosexportError, match="'position_embedding_type' = \"relative_key\": LayoutLM's embeddings") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


def test_layoutlmv2_and_v3_buckets_are_t5s_bidirectional_as_their_pending_reason_says():
    """LayoutLMv2's relative_position_bucket and LayoutLMv3's (1-D: 32 buckets, max 128; 2-D: 64, max 256, their
    configs' defaults) against the t5 encoding's float64 buckets on every offset in ±200000: equal, the causal buckets
    differing; what keeps them pending is where their positions come from and v3's scale, not the buckets."""
    import torch
    from transformers.models.layoutlmv2.modeling_layoutlmv2 import relative_position_bucket
    from transformers.models.layoutlmv3.modeling_layoutlmv3 import LayoutLMv3Encoder

    from posexport.encodings.t5 import relative_bucket

    offsets = np.arange(-200000, 200001)
    for buckets, distance in ((32, 128), (64, 256)):
        ours = relative_bucket(offsets, True, buckets, distance)
        v2 = relative_position_bucket(torch.from_numpy(offsets), num_buckets=buckets, max_distance=distance).numpy()
        v3 = LayoutLMv3Encoder.relative_position_bucket(None, torch.from_numpy(offsets), num_buckets=buckets,
                                                        max_distance=distance).numpy()
        assert np.array_equal(ours, v2) and np.array_equal(ours, v3)
        assert np.mean(relative_bucket(offsets, False, buckets, distance) != v2) > 0.4
