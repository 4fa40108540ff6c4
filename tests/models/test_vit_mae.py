"""ViT-MAE: its own tables (and its pretraining decoder's)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, GRIDS, feeds_for, normalised_error  # noqa: E402


@pytest.mark.parametrize("pretraining", [True, False])
def test_vit_mae_tables_are_its_own(tmp_path, pretraining):
    """transformers' own tiny ViTMAEForPreTraining: the table it initialises is a zero class row over posexport's
    sincos-2d reference; holding random tables read back from a checkpoint, what its embeddings add on a forward
    with a fixed noise (class row and the kept patches' rows) and what its decoder adds to [class | unshuffled
    tokens] are the graphs' references; the hf runtime's interpolate_pos_encoding agrees at the trained grid and
    three others. A classification folder reads the encoder's table alone."""
    import torch
    from transformers.models.vit_mae.modeling_vit_mae import ViTMAEEmbeddings, ViTMAEForPreTraining

    sizes = {"image_size": 32, "patch_size": 8, "decoder_hidden_size": 32, "decoder_num_hidden_layers": 1,
             "decoder_num_attention_heads": 4, "decoder_intermediate_size": 32}
    architectures = ["ViTMAEForPreTraining" if pretraining else "ViTMAEForImageClassification"]
    folder = zoo.tiny("vit_mae", tmp_path / "vit_mae", **sizes, architectures=architectures)
    config = zoo.config_class("vit_mae").from_pretrained(folder)
    fresh = type(config)()
    assert (fresh.hidden_size, fresh.image_size, fresh.patch_size) == (768, 224, 16)  # the reader's defaults
    torch.manual_seed(0)
    model = ViTMAEForPreTraining(config).eval()
    embeddings, decoder = model.vit.embeddings, model.decoder
    fresh_embeddings = ViTMAEEmbeddings(config)
    fresh_embeddings.initialize_weights()  # what a model built from scratch starts from
    sincos = get_encoding("sincos-2d")
    grid = np.random.default_rng(2).standard_normal((1, 4, 4, 64))
    initial = (sincos.reference(sincos.params(dim=64, max_grid=16), {"x": grid}) - grid).reshape(16, 64)
    table = fresh_embeddings.position_embeddings[0].detach().double().numpy()
    assert np.max(np.abs(table - np.vstack([np.zeros((1, 64)), initial]))) < 1e-6 and np.max(np.abs(initial)) > 0.5
    rng = np.random.default_rng(0)
    tables = {"vit.embeddings.position_embeddings": rng.standard_normal((1, 17, 64)).astype(np.float32),
              "decoder.decoder_pos_embed": rng.standard_normal((1, 17, 32)).astype(np.float32)}
    save_file(tables, str(folder / "model.safetensors"))
    embeddings.position_embeddings.data = torch.from_numpy(tables["vit.embeddings.position_embeddings"])
    decoder.decoder_pos_embed.data = torch.from_numpy(tables["decoder.decoder_pos_embed"])
    seen = {}
    for name in ("vit.embeddings.patch_embeddings", "vit.embeddings", "decoder.decoder_embed"):
        model.get_submodule(name).register_forward_hook(
            lambda _m, _a, out, name=name: seen.__setitem__(name, (out[0] if isinstance(out, tuple) else out).double()))
    decoder.decoder_layers[0].register_forward_pre_hook(lambda _m, args: seen.__setitem__("decoder", args[0].double()))
    noise = torch.from_numpy(rng.random((1, 16)).astype(np.float32))
    with torch.no_grad():
        out = model(torch.from_numpy(rng.standard_normal((1, 3, 32, 32)).astype(np.float32)), noise=noise)
    kept = torch.argsort(noise, dim=1)[0, :4].numpy()  # (1 − mask_ratio 0.75) · 16 patches, lowest noise first
    with torch.no_grad():
        encoder_rows = torch.cat([seen["vit.embeddings"][:, :1] - embeddings.cls_token.double(),
                                  seen["vit.embeddings"][:, 1:] - seen["vit.embeddings.patch_embeddings"][:, kept]], 1)
        projected = seen["decoder.decoder_embed"]
        restored = torch.cat([projected[:, 1:], decoder.mask_token.double().expand(1, 12, -1)], 1)[:, out.ids_restore[0]]
        decoder_rows = seen["decoder"] - torch.cat([projected[:, :1], restored], 1)
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["vit-learned", *(["learned-decoder"] if pretraining else [])]
    encoding = get_encoding("vit-learned")
    p = encoding.params(**{**plan.roles[0].values, "max_grid": 24})
    x, cls = rng.standard_normal((1, 4, 4, 64)), rng.standard_normal((1, 1, 64))
    ours = encoding.reference(p, {"x": x, "cls": cls}) - np.concatenate([cls, x.reshape(1, 16, 64)], 1)
    assert np.max(np.abs(ours[:, np.concatenate([[0], 1 + kept])] - encoder_rows.numpy())) < 1e-5
    entry = plan.manifest_entry(plan.roles[0])
    assert recipe_problem(entry) == ""  # the hf runtime accepts the recipe
    session = oracle.session(Built(encoding, p, entry), entry)
    for feeds in feeds_for(encoding, p, rng, grids=((4, 4), *GRIDS[1:])):
        exact = encoding.reference(p, feeds)
        assert normalised_error(session.run(feeds), exact) < 1e-5
    if pretraining:
        role = plan.roles[1]
        learned_encoding = get_encoding(role.encoding)
        x = rng.standard_normal((1, 17, 32))
        ours = learned_encoding.reference(learned_encoding.params(**role.values), {"x": x, "position_ids": np.arange(17)[None]})
        assert np.max(np.abs(ours - (x + decoder_rows.numpy()))) < 1e-5
