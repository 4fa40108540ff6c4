"""Swin-V2's continuous position bias: each block's own MLP, misreads failing, configs it cannot read refused."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("transformers")

from safetensors.numpy import save_file  # noqa: E402

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import read_model, swinv2  # noqa: E402
from posexport.models.cli import build as cli_build  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import own_model  # noqa: E402


# Tiny Swin-V2 and Swin2SR: Swin-V2's last stage has a 2-patch grid, so its window shrinks to 2 under a
# pretrained window of 6; its first stage's offsets are divided by a pretrained window of 3.
CONTINUOUS_SIZES = {
    "swinv2": dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1, 1], num_heads=[2, 2, 4], window_size=4,
                   pretrained_window_sizes=[3, 0, 6]),
    "swin2sr": dict(image_size=8, patch_size=1, embed_dim=16, depths=[1, 2], num_heads=[2, 4], window_size=4),
}


@pytest.mark.parametrize("model_type", sorted(swinv2.FAMILIES))
def test_swinv2_continuous_biases_pass_parity_from_model_and_misreads_fail(tmp_path, model_type):
    """Random MLPs saved under the names the model gives them: each block's window, pretrained window and heads
    are those its own self-attention was built with; every graph built as a user builds it passes `parity
    --from-model` against that self-attention's bias (Swinv2SelfAttention, Swin2SRSelfAttention); the first block's
    graph with another pretrained window, or holding the MLP's table without 16·sigmoid, fails it."""
    from transformers import AutoConfig

    from posexport import export
    from posexport.encodings.swin import log_spaced_offsets, mlp_weights, relative_index

    folder = zoo.tiny(model_type, tmp_path / model_type, **CONTINUOUS_SIZES[model_type])
    model = own_model(AutoConfig.from_pretrained(folder))
    rng = np.random.default_rng(0)
    save_file({name: (rng.standard_normal(tuple(t.shape)) * (512**-0.5 if name.endswith("2.weight") else 1.0)).astype(np.float32)
               for name, t in model.state_dict().items() if "continuous_position_bias_mlp" in name},
              str(folder / "model.safetensors"))
    plan = read_model(folder)
    assert len(plan.roles) == sum(CONTINUOUS_SIZES[model_type]["depths"])
    for role in plan.roles:
        attention = model.get_submodule(role.values["key"].removesuffix(".continuous_position_bias_mlp"))
        window, pretrained = role.values["window_h"], role.values["pretrained_window"]
        assert (attention.window_size, attention.pretrained_window_size) == ((window, window), (pretrained, pretrained))
        assert attention.num_attention_heads == role.values["heads"], role.role
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    graphs = sorted((tmp_path / "built").glob("*.onnx"))
    assert len(graphs) == len(plan.roles)
    for graph in graphs:
        report = run_model_parity(folder, graph, ["ort-cpu"], batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), (graph.name, bad)
    role = plan.roles[0]
    entry = plan.manifest_entry(role)
    assert recipe_problem(entry) == "" and "not a window size" in recipe_problem({**entry, "hf": {**entry["hf"], "pretrained_window": "3"}})
    p = get_encoding("swin").params(**role.values)
    first, bias, second = mlp_weights(p)
    raw = np.maximum(log_spaced_offsets(p.window_h, p.window_w, p.pretrained_window) @ first.T + bias, 0) @ second.T
    np.save(tmp_path / "raw.npy", raw)
    window = role.values["window_h"]
    misreads = {"other-pretrained": {**role.values, "pretrained_window": 0 if p.pretrained_window else window + 4},
                "without-sigmoid": {"window_h": window, "window_w": window, "heads": p.heads, "weights": str(tmp_path / "raw.npy")}}
    for name, values in misreads.items():
        art = export.build("swin", values, backend="portable")
        art.manifest["model"] = plan.manifest_entry(role)
        wrong, _ = export.save(art, tmp_path, name)
        report = run_model_parity(folder, wrong, ["ort-cpu"], batches=(2,), properties=False)
        hf = [r for r in report.results if r.runtime == "hf"]
        assert hf and all(r.status == "fail" and r.comparison.normalised > 100 * r.comparison.bound for r in hf), name


REFUSED_CONTINUOUS = [
    ("swinv2", dict(use_absolute_embeddings=True), "num_patches + 1 rows"),
    ("swin2sr", dict(use_absolute_embeddings=True), "num_patches + 1 rows"),
    ("swinv2", dict(pretrained_window_sizes=[1, 0]), "'pretrained_window_sizes' = [1, 0]"),
    ("swinv2", dict(pretrained_window_sizes=[0]), "needs one entry per stage"),
    ("swinv2", dict(image_size=8, patch_size=8), "leaves stage 1 no patches"),
    ("swinv2", dict(), "lie in two checkpoint files"),  # its first block's MLP split over two shards
]


@pytest.mark.parametrize("model_type, overrides, message", REFUSED_CONTINUOUS)
def test_swinv2_configs_it_cannot_read_are_refused_in_one_line(tmp_path, model_type, overrides, message):
    two_stages = {"depths": [1, 1], "num_heads": [2, 2], **({"pretrained_window_sizes": [0, 0]} if model_type == "swinv2" else {})}
    values = {**CONTINUOUS_SIZES[model_type], **two_stages, **overrides}
    folder = zoo.tiny(model_type, tmp_path / model_type, **values)
    mlp = f"encoder.layers.0.blocks.0.{swinv2.MLP}"
    rng = np.random.default_rng(0)
    shards = {"first.safetensors": {f"{mlp}.0.weight": rng.standard_normal((512, 2)).astype(np.float32)},
              "second.safetensors": {f"{mlp}.0.bias": rng.standard_normal(512).astype(np.float32),
                                     f"{mlp}.2.weight": rng.standard_normal((2, 512)).astype(np.float32)}}
    for name, tensors in shards.items():
        save_file(tensors, str(folder / name))
    index = {"weight_map": {key: name for name, tensors in shards.items() for key in tensors}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(PosexportError, match=re.escape(message)) as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)
