"""VideoPrism's text tower: its embeddings' own sinusoid."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built  # noqa: E402


def test_videoprism_text_sinusoid_is_its_embeddings_own(tmp_path):
    """VideoPrismTextEmbeddings' forward on random token embeddings: what it returns for the tokens is the
    graph's reference at 0-based positions on the scaled embeddings; the hf runtime's table agrees too."""
    import torch
    from transformers.models.videoprism.modeling_videoprism import VideoPrismTextEmbeddings

    folder = zoo.tiny("videoprism_text_model", tmp_path / "videoprism", max_position_embeddings=24)
    embeddings = VideoPrismTextEmbeddings(zoo.config_class("videoprism_text_model").from_pretrained(folder)).eval()
    tokens = torch.from_numpy(np.random.default_rng(0).standard_normal((2, 17, 64)).astype(np.float32))
    with torch.no_grad():
        theirs = embeddings(inputs_embeds=tokens)[:, :17].double().numpy()
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    feeds = {"x": tokens.double().numpy() * 8.0, "position_ids": np.tile(np.arange(17), (2, 1))}  # √64
    assert np.max(np.abs(encoding.reference(p, feeds) - theirs)) < 1e-5
    assert recipe_problem(plan.manifest_entry(role)) == ""  # the hf runtime accepts the recipe
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    assert np.max(np.abs(session.run(feeds) - encoding.reference(p, feeds))) < 1e-5
