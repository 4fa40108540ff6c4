"""ESM: its rotary and its absolute table as its embeddings add them; configs it cannot read exactly refused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.dtypes import DTYPES  # noqa: E402
from posexport.errors import PosexportError  # noqa: E402
from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.cli import build as cli_build, lines as build_lines  # noqa: E402
from posexport.models.oracle import model_bound  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, feeds_for, normalised_error, rows_the_table_adds  # noqa: E402


def esm_model(folder):
    import torch
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    return AutoModel.from_config(AutoConfig.from_pretrained(folder)).eval()


def test_esm_rotary_is_its_own_and_a_misread_fails(tmp_path):
    """ESM-2's rope: the frequencies of its EsmRotaryEmbedding, the rotation of its apply function at the
    position_ids its forward gives the rotary (0 … seq − 1); half-split pairs read as interleaved fail."""
    import torch

    folder = zoo.tiny("esm", tmp_path / "esm", position_embedding_type="rotary", rope_theta=500.0, pad_token_id=1)
    model = esm_model(folder)
    seen = []
    model.rotary_embeddings.register_forward_hook(lambda _m, args, _out: seen.append(args[1].numpy()))
    with torch.no_grad():
        model(input_ids=torch.arange(4, 13)[None])
    plan = read_model(folder)
    (role,) = plan.roles
    assert role.layers == (0, 1, 2, 3) and np.array_equal(seen[0], np.arange(9)[None])
    encoding, entry, rng = get_encoding("rope"), plan.manifest_entry(role), np.random.default_rng(0)
    ours, _ = scaling.frequencies(encoding.params(**role.values))
    theirs = model.rotary_embeddings.inv_freq.double().numpy()
    assert np.max(np.abs(ours - theirs)) <= 1e-6 * np.max(theirs)
    for layout, agrees in (("half", True), ("interleaved", False)):
        p = encoding.params(**{**role.values, "pair_layout": layout})
        session = oracle.session(Built(encoding, p, entry), entry)
        for feeds in feeds_for(encoding, p, rng):
            exact = encoding.reference(p, feeds)
            error = normalised_error(session.run(feeds), exact)
            bound = model_bound(DTYPES["float32"].bound(5016), 5016)
            assert (error < bound) if agrees else (error > 100 * bound), (layout, error)
    assert any(line.startswith("plan: layers 0-3: rope") for line in build_lines(cli_build(folder, None, {}, tmp_path, None, backend="portable")))
    report = run_model_parity(folder, tmp_path / "esm-rope.onnx", ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
    assert all(r.status == "pass" for r in report.results) and any(r.runtime == "hf" for r in report.results)


def test_esm_rotary_refuses_a_checkpoint_inv_freq_stored_rounded(tmp_path):
    """The model rotates with the checkpoint's inv_freq buffer: float32 as transformers forms it is read,
    float16-rounded (as the load_hook warns older checkpoints may be) is refused in one line."""
    folder = zoo.tiny("esm", tmp_path / "esm", position_embedding_type="rotary")
    inv_freq = esm_model(folder).rotary_embeddings.inv_freq.numpy()
    save_file({"esm.rotary_embeddings.inv_freq": inv_freq}, str(folder / "model.safetensors"))
    assert read_model(folder).roles[0].values["base"] == 10000.0
    save_file({"esm.encoder.layer.0.attention.self.rotary_embeddings.inv_freq": inv_freq.astype(np.float16)},
              str(folder / "model.safetensors"))
    with pytest.raises(PosexportError, match="rotary_embeddings.inv_freq .* differs from base 10000's") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


def test_esm_absolute_table_adds_the_rows_its_embeddings_add(tmp_path):
    """ESM-1b's table, random in a checkpoint of it alone: the rows EsmEmbeddings adds on a forward of 9
    tokens are the graph's at position_ids from padding_idx + 1; read from 0 (a misread) they are not."""
    import torch

    folder = zoo.tiny("esm", tmp_path / "esm", pad_token_id=1)
    model = esm_model(folder)
    added = rows_the_table_adds(model, "embeddings.position_embeddings", folder, input_ids=torch.arange(4, 13)[None])
    (role,) = read_model(folder).roles
    encoding = get_encoding(role.encoding)
    p, x = encoding.params(**role.values), np.random.default_rng(0).standard_normal((1, 9, 64))
    errors = [np.max(np.abs(encoding.reference(p, {"x": x, "position_ids": np.arange(9)[None] + start}) - (x + added)))
              for start in (2, 0)]
    assert errors[0] < 1e-6 and errors[1] > 0.1


@pytest.mark.parametrize("overrides, message", [
    ({}, "needs key 'pad_token_id'"),  # the config class has no pad id; ESM-1b numbers positions from it
    ({"pad_token_id": 1, "position_embedding_type": "relative_key"}, "ESM's forms are rotary and absolute"),
    ({"pad_token_id": 1, "is_folding_model": True}, "ESMFold's folding trunk adds relative position bins"),
])
def test_esm_configs_it_cannot_read_exactly_are_refused_in_one_line(tmp_path, overrides, message):
    folder = zoo.tiny("esm", tmp_path / "esm", **overrides)
    zoo.table_checkpoint(folder, "embeddings.position_embeddings.weight", (1026, 64))
    with pytest.raises(PosexportError, match=message) as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)
