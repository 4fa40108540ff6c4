"""Learned position tables (GPT-2, BERT, BART and their kin): the rows transformers adds, at the positions the reader
says; I-BERT's quantised embeddings refused; TAPAS' ids restarting per cell."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import learned, read_model  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import START, own_model, rows_the_table_adds, submodule  # noqa: E402


@pytest.mark.parametrize("model_type", sorted(learned.TABLES))
def test_learned_tables_add_the_rows_transformers_adds(tmp_path, model_type):
    """transformers' own tiny model, holding a random table read back from a checkpoint of it alone: the
    rows its position embedding adds on a forward of 9 tokens are the graph's reference at the position_ids
    the reader says the model uses (from 0, padding_idx + 1 or 2)."""
    import torch
    from transformers import AutoConfig

    folder = zoo.tiny(model_type, tmp_path / model_type)
    config = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    model = own_model(config).eval()
    keys, rows_key, rows_default, start = learned.TABLES[model_type]
    assert getattr(type(config)(), rows_key) == rows_default  # the line's default is the config class's
    module = model.get_submodule(keys[0].removesuffix(".weight"))
    module.weight.data = torch.from_numpy(zoo.table_checkpoint(folder, keys[0], tuple(module.weight.shape)))
    added = []
    # I-BERT's QuantEmbedding returns (rows, scaling factor)
    module.register_forward_hook(lambda _m, _a, rows: added.append((rows[0] if isinstance(rows, tuple) else rows)[0, :9].double().numpy()))
    tokens = [i for i in range(2, 64) if i != getattr(config, "pad_token_id", None)][:9]
    with torch.no_grad():
        model(input_ids=torch.tensor([tokens]))
    (role,) = read_model(folder).roles
    encoding = get_encoding(role.encoding)
    x = np.random.default_rng(0).standard_normal((1, 9, module.weight.shape[1]))
    positions = np.arange(9)[None] + START[start](config)
    ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": positions})
    assert np.max(np.abs(ours - (x + added[0]))) < 1e-6


@pytest.mark.parametrize("model_type", sorted(learned.BART_LIKE))
def test_encoder_decoder_tables_add_the_rows_transformers_adds(tmp_path, model_type):
    """As above for the BART family: each part's <X>LearnedPositionalEmbedding, holding a random table read
    back from a checkpoint, adds on a forward exactly the rows the graph adds at 0-based positions."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = zoo.tiny(model_type, tmp_path / model_type)
    config = AutoConfig.from_pretrained(folder)
    torch.manual_seed(0)
    parts, _, defaults, _ = learned.BART_LIKE[model_type]
    model = (own_model(config) if parts != ("decoder",) else AutoModelForCausalLM.from_config(config)).eval()
    added, tables = {}, {}
    for part in parts:
        key, module = next((k, m) for k in learned.table_keys(part) if (m := submodule(model, k.removesuffix(".weight"))))
        tables[key] = torch.from_numpy(np.random.default_rng(len(tables)).standard_normal(tuple(module.weight.shape)).astype(np.float32))
        module.weight.data = tables[key]
        module.register_forward_hook(lambda _m, _a, rows, part=part: added.setdefault(part, []).append(rows.reshape(-1, rows.shape[-1])[:9]))
    save_file({k: v.numpy() for k, v in tables.items()}, str(folder / "model.safetensors"))
    tokens = torch.tensor([[i for i in range(2, 64) if i != getattr(config, "pad_token_id", None)][:9]])
    with torch.no_grad():
        model(input_ids=tokens, **({"decoder_input_ids": tokens} if "encoder" in parts else {}))
    encoding, x = get_encoding("learned"), np.random.default_rng(0).standard_normal((1, 9, tables[key].shape[1]))
    roles = read_model(folder).roles
    assert [r.role for r in roles] == [f"learned-{p}" if p else "learned" for p in parts]
    for part, role in zip(parts, roles):
        ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.arange(9)[None]})
        assert np.max(np.abs(ours - (x + added[part][0].double().numpy()))) < 1e-6, part
    assert [getattr(type(config)(), k) for k in learned.BART_LIKE[model_type][1]] == list(defaults)


def test_ibert_quantised_embeddings_are_refused_in_one_line(tmp_path):
    folder = zoo.tiny("ibert", tmp_path / "ibert", quant_mode=True)
    zoo.table_checkpoint(folder, "embeddings.position_embeddings.weight", (512, 64))
    with pytest.raises(PosexportError, match="'quant_mode' = true: I-BERT's quantised embeddings") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


def test_tapas_table_adds_its_rows_at_the_ids_restarting_per_cell(tmp_path):
    """With a table of cells in token_type_ids, TapasEmbeddings restarts position_ids at each cell: the graph at those
    ids (the note's rule) adds the rows the model adds; at token indices (a misread) it does not."""
    import torch

    folder = zoo.tiny("tapas", tmp_path / "tapas")
    model = own_model(zoo.config_class("tapas").from_pretrained(folder)).eval()
    # 3 question tokens, then cells (column, row): (1, 1) × 2 tokens, (2, 1) × 3, (1, 2) × 1
    columns, rows = [0, 0, 0, 1, 1, 2, 2, 2, 1], [0, 0, 0, 1, 1, 1, 1, 1, 2]
    token_types = torch.zeros(1, 9, 7, dtype=torch.long)
    token_types[0, :, 1], token_types[0, :, 2] = torch.tensor(columns), torch.tensor(rows)
    added = rows_the_table_adds(model, "embeddings.position_embeddings", folder, input_ids=torch.arange(4, 13)[None],
                                token_type_ids=token_types)
    (role,) = read_model(folder).roles
    assert any("restart at each table cell" in note for note in role.notes)
    encoding = get_encoding(role.encoding)
    p, x = encoding.params(**role.values), np.random.default_rng(0).standard_normal((1, 9, 64))
    per_cell = np.array([[0, 1, 2, 0, 1, 0, 1, 2, 0]])
    errors = [np.max(np.abs(encoding.reference(p, {"x": x, "position_ids": ids}) - (x + added)))
              for ids in (per_cell, np.arange(9)[None])]
    assert errors[0] < 1e-6 and errors[1] > 0.1
