"""ViT-style towers: grids resampled as each tower's own code (bicubic, antialiased, bilinear, scale factor), their
lines' defaults against the config classes, DINOv2's registers, IDEFICS' size-based resampling."""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model, vit  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, GRIDS, built_graph_passes_parity_from_model, feeds_for, misread_statuses, normalised_error  # noqa: E402


@pytest.mark.parametrize("model_type", sorted(vit.FAMILIES))
def test_vision_tower_grids_resample_as_the_towers_own_code(tmp_path, model_type):
    """A tiny tower config with a random table in a checkpoint of it alone: the graph's reference against the
    tower's own embeddings class (its interpolate_pos_encoding) at the trained grid and three others."""
    import importlib

    tower = vit.FAMILIES[model_type]
    assert vit.DEFAULT_MAX_GRID == get_encoding("vit-learned").params().max_grid
    folder = zoo.tiny(model_type, tmp_path / model_type)
    embeddings = getattr(importlib.import_module(f"transformers.models.{tower.module}"), tower.embeddings)(
        zoo.config_class(model_type).from_pretrained(folder))
    table = embeddings.get_parameter(tower.table)
    zoo.table_checkpoint(folder, f"embeddings.{tower.table}", tuple(table.shape))
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**{**role.values, "max_grid": max(24, role.values["trained_h"])})
    assert recipe_problem(plan.manifest_entry(role)) == ""  # the hf runtime accepts the recipe
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    side = (role.values["trained_h"], role.values["trained_w"])
    for feeds in feeds_for(encoding, p, np.random.default_rng(0), grids=(side, *GRIDS[1:])):
        exact = encoding.reference(p, feeds)
        assert normalised_error(session.run(feeds), exact) < 1e-5, role.values


@pytest.mark.parametrize("model_type", sorted(vit.FAMILIES))
def test_tower_lines_default_sizes_are_their_config_classes(model_type):
    """A config.json without image_size or patch_size means its class's default: the line's fallback is that default."""
    config = zoo.config_class(model_type)()
    assert [square_side(config.image_size), square_side(config.patch_size)] == list(vit.FAMILIES[model_type].sizes)


def square_side(size):
    return size[0] if isinstance(size, (list, tuple)) else size


# Towers resampling their grid bicubically with antialias=True (torch's a = −0.5): (embeddings module, class).
ANTIALIASED_BICUBIC_TOWERS = {
    "dinov2_with_registers": ("dinov2_with_registers.modeling_dinov2_with_registers", "Dinov2WithRegistersEmbeddings"),
    "rf_detr_dinov2": ("rf_detr.modeling_rf_detr", "RfDetrDinov2Embeddings"),
}


@pytest.mark.parametrize("model_type", sorted(ANTIALIASED_BICUBIC_TOWERS))
def test_antialiased_bicubic_towers_pass_parity_from_model_and_plain_bicubic_fails(tmp_path, model_type):
    """A tiny tower of its own config with a random table: its graph built as a user builds it passes `parity
    --from-model` against the tower's own interpolate_pos_encoding on the sweep's grids; the same table read as
    DINOv2's (plain bicubic, a = −0.75) fails it on every grid but the trained one."""
    import importlib


    module, cls = ANTIALIASED_BICUBIC_TOWERS[model_type]
    folder = zoo.tiny(model_type, tmp_path / model_type)
    embeddings = getattr(importlib.import_module(f"transformers.models.{module}"), cls)(
        zoo.config_class(model_type).from_pretrained(folder))
    zoo.table_checkpoint(folder, "embeddings.position_embeddings", tuple(embeddings.position_embeddings.shape))
    built_graph_passes_parity_from_model(folder, tmp_path)
    (role,) = read_model(folder).roles
    assert (role.values["antialias"], role.values["cubic_coefficient"]) == (True, -0.5)
    statuses, grids = misread_statuses(folder, tmp_path, {**role.values, "antialias": False, "cubic_coefficient": -0.75})
    trained = (role.values["trained_h"], role.values["trained_w"])
    assert len(statuses) > 2 and all((s == "pass") == (grids[c] == trained) for c, s in statuses.items()), statuses


def test_dinov2_with_registers_forward_is_y_with_its_registers_after_the_class_token(tmp_path):
    """The embeddings forward on random pixels at a 5 × 3 patch grid (not the trained 14 × 14): the graph's reference on
    its own patch embeddings and class token, with the register tokens put in after the class token (the line's note);
    the same table read as plain bicubic misses it."""
    import torch
    from transformers.models.dinov2_with_registers.modeling_dinov2_with_registers import Dinov2WithRegistersEmbeddings

    folder = zoo.tiny("dinov2_with_registers", tmp_path / "registers")
    config = zoo.config_class("dinov2_with_registers").from_pretrained(folder)
    embeddings = Dinov2WithRegistersEmbeddings(config).eval()
    table = zoo.table_checkpoint(folder, "embeddings.position_embeddings", tuple(embeddings.position_embeddings.shape))
    embeddings.position_embeddings.data = torch.from_numpy(table)
    torch.manual_seed(0)
    embeddings.register_tokens.data.normal_()
    pixels = torch.randn(2, 3, 5 * 16, 3 * 16)
    with torch.no_grad():
        theirs = embeddings(pixels).double().numpy()
        patches = embeddings.patch_embeddings(pixels).double().numpy().reshape(2, 5, 3, -1)
    (role,) = read_model(folder).roles
    encoding = get_encoding("vit-learned")
    feeds = {"x": patches, "cls": np.broadcast_to(embeddings.cls_token.detach().double().numpy(), (2, 1, 64))}
    registers = np.broadcast_to(embeddings.register_tokens.detach().double().numpy(), (2, 4, 64))

    def error(values):
        y = encoding.reference(encoding.params(**values), feeds)
        return np.max(np.abs(np.concatenate([y[:, :1], registers, y[:, 1:]], axis=1) - theirs))

    assert error(role.values) < 1e-5 and error({**role.values, "antialias": False, "cubic_coefficient": -0.75}) > 0.1


def test_idefics_tower_passes_parity_from_model_and_size_based_bicubic_fails(tmp_path):
    """A tiny IDEFICS tower (embed_dim 64, not the default 768) with a random table: its graph built as a user builds it
    passes `parity --from-model` against IdeficsVisionEmbeddings.interpolate_pos_encoding (F.interpolate by the scale
    factor (n + 0.1)/N; the trained grid kept); the same table resampled by size fails on every grid but the trained one."""
    from transformers.models.idefics.modeling_idefics import IdeficsVisionEmbeddings

    folder = zoo.tiny("idefics_vision", tmp_path / "idefics", embed_dim=64)
    embeddings = IdeficsVisionEmbeddings(zoo.config_class("idefics_vision").from_pretrained(folder))
    zoo.table_checkpoint(folder, "embeddings.position_embedding.weight", tuple(embeddings.position_embedding.weight.shape))
    built_graph_passes_parity_from_model(folder, tmp_path)
    (role,) = read_model(folder).roles
    assert (role.values["dim"], role.values["trained_h"], role.values["resample_by"]) == (64, 16, "scale-factor")
    # One side at the trained size: resampled on both axes all the same (the table is kept at the trained grid alone).
    encoding, entry = get_encoding("vit-learned"), read_model(folder).manifest_entry(role)
    p = encoding.params(**role.values)
    for feeds in feeds_for(encoding, p, np.random.default_rng(0), grids=((16, 9), (9, 16))):
        exact = encoding.reference(p, feeds)
        assert np.max(np.abs(oracle.session(Built(encoding, p, entry), entry).run(feeds) - exact)) / np.max(np.abs(exact)) < 1e-5
    statuses, grids = misread_statuses(folder, tmp_path, {**role.values, "resample_by": "size"})
    assert len(statuses) > 2 and all((s == "pass") == (grids[c] == (16, 16)) for c, s in statuses.items()), statuses


# Towers resampling their grid bilinearly with antialias=True: (embeddings module, class, the table in it), the table
# saved under the name a checkpoint of the tower alone gives it.
ANTIALIASED_BILINEAR_TOWERS = {
    "siglip2_vision_model": ("siglip2.modeling_siglip2", "Siglip2VisionEmbeddings", "position_embedding.weight"),
    "tipsv2_vision_model": ("tipsv2.modeling_tipsv2", "Tipsv2VisionEmbeddings", "position_embeddings"),
}


@pytest.mark.parametrize("model_type", sorted(ANTIALIASED_BILINEAR_TOWERS))
def test_antialiased_bilinear_towers_pass_parity_from_model_and_plain_bilinear_fails(tmp_path, model_type):
    """A tiny tower of its own config with a random table: its graph built as a user builds it passes `parity
    --from-model` against the tower's own code (SigLIP-2's resize_positional_embeddings, TIPSv2's
    interpolate_pos_encoding) on the sweep's grids; the same table built as plain bilinear fails it on exactly the
    grids that shrink an axis."""
    import importlib


    module, cls, table = ANTIALIASED_BILINEAR_TOWERS[model_type]
    folder = zoo.tiny(model_type, tmp_path / model_type)
    embeddings = getattr(importlib.import_module(f"transformers.models.{module}"), cls)(
        zoo.config_class(model_type).from_pretrained(folder))
    zoo.table_checkpoint(folder, f"embeddings.{table}", tuple(embeddings.get_parameter(table).shape))
    built_graph_passes_parity_from_model(folder, tmp_path)
    (role,) = read_model(folder).roles
    assert (role.values["interpolation"], role.values["antialias"]) == ("bilinear", True)
    statuses, grids = misread_statuses(folder, tmp_path, {**role.values, "antialias": False})
    trained = (role.values["trained_h"], role.values["trained_w"])
    shrinks = {c: any(n < t for n, t in zip(grid, trained)) for c, grid in grids.items()}
    assert statuses and all((s == "fail") == shrinks[c] for c, s in statuses.items()), statuses
