"""VideoMAE: its own sinusoids (and its pretraining decoder's)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built  # noqa: E402


@pytest.mark.parametrize("pretraining", [True, False])
def test_videomae_sinusoids_are_its_own(tmp_path, pretraining):
    """transformers' own tiny VideoMAEForPreTraining on random frames with a random mask: what its embeddings add to
    the kept patches (their output less the patch embeddings) and what the decoder's input adds to the projected
    visible tokens and the mask tokens are the graph's interleaved reference at each token's patch index; sines first
    misses; a classification folder reads the encoder's table alone."""
    import torch
    from transformers.models.videomae.modeling_videomae import VideoMAEForPreTraining

    sizes = {"image_size": 32, "patch_size": 8, "num_frames": 4, "tubelet_size": 2, "decoder_hidden_size": 32,
             "decoder_num_hidden_layers": 1, "decoder_num_attention_heads": 4, "decoder_intermediate_size": 32}
    architectures = ["VideoMAEForPreTraining" if pretraining else "VideoMAEForVideoClassification"]
    folder = zoo.tiny("videomae", tmp_path / "videomae", **sizes, architectures=architectures)
    config = zoo.config_class("videomae").from_pretrained(folder)
    assert {k: getattr(type(config)(), k) for k in ("hidden_size", "decoder_hidden_size", "image_size", "patch_size",
                                                    "num_frames", "tubelet_size")} == \
        {"hidden_size": 768, "decoder_hidden_size": 384, "image_size": 224, "patch_size": 16, "num_frames": 16, "tubelet_size": 2}
    plan = read_model(folder)
    assert [r.role for r in plan.roles] == ["sinusoidal-encoder", *(["sinusoidal-decoder"] if pretraining else [])]
    torch.manual_seed(0)
    model = VideoMAEForPreTraining(config).eval()
    seen = {}
    for name in ("videomae.embeddings.patch_embeddings", "videomae.embeddings", "encoder_to_decoder"):
        model.get_submodule(name).register_forward_hook(lambda _m, _a, out, name=name: seen.__setitem__(name, out.double()))
    model.decoder.register_forward_pre_hook(lambda _m, args: seen.__setitem__("decoder", args[0].double()))
    rng = np.random.default_rng(0)
    masked = np.zeros(32, bool)
    masked[rng.permutation(32)[:20]] = True
    with torch.no_grad():
        model(torch.from_numpy(rng.standard_normal((1, 4, 3, 32, 32)).astype(np.float32)),
              bool_masked_pos=torch.from_numpy(masked[None]))
    visible, hidden = np.flatnonzero(~masked), np.flatnonzero(masked)
    mask_tokens = model.mask_token.detach().double().expand(1, 20, -1)
    added = {"sinusoidal-encoder": (seen["videomae.embeddings"] - seen["videomae.embeddings.patch_embeddings"][:, visible]).numpy(),
             "sinusoidal-decoder": (seen["decoder"] - torch.cat([seen["encoder_to_decoder"], mask_tokens], 1)).numpy()}
    positions = {"sinusoidal-encoder": visible, "sinusoidal-decoder": np.concatenate([visible, hidden])}
    for role in plan.roles:
        encoding = get_encoding(role.encoding)
        p = encoding.params(**role.values)
        rows = added[role.role]
        x = rng.standard_normal(rows.shape)
        feeds = {"x": x, "position_ids": positions[role.role][None]}
        assert np.max(np.abs(encoding.reference(p, feeds) - (x + rows))) < 1e-5, role.role
        sines_first = encoding.reference(encoding.params(**{**role.values, "pair_layout": "concat"}), feeds)
        assert np.max(np.abs(sines_first - (x + rows))) > 0.5, role.role
        assert recipe_problem(plan.manifest_entry(role)) == ""  # parity's hf runtime runs it and agrees
        session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
        assert np.max(np.abs(session.run(feeds) - encoding.reference(p, feeds))) < 1e-5, role.role
