"""TimesFM: its own sinusoid rolled past the padding; configs without its form refused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.cli import build as cli_build  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built  # noqa: E402


def test_timesfm_sinusoid_is_its_own_rolled_past_the_padding(tmp_path):
    """transformers' own tiny TimesFM (use_positional_embedding, max_timescale 500) on two random series, the second
    with 10 leading padded values (two whole patches): what reaches its first layer, less the input layer's output and
    the frequency embedding, is the graph's reference at (j − k) mod patches, k = 0 and 2; unrolled positions miss;
    the hf runtime's module agrees, and so does the graph built from the folder (parity --from-model)."""
    import torch
    from transformers.models.timesfm.modeling_timesfm import TimesFmModel

    sizes = {"use_positional_embedding": True, "max_timescale": 500, "hidden_size": 32, "intermediate_size": 32,
             "head_dim": 8, "num_attention_heads": 4, "num_hidden_layers": 1, "patch_length": 4, "context_length": 36}
    folder = zoo.tiny("timesfm", tmp_path / "timesfm", **sizes)
    config = zoo.config_class("timesfm").from_pretrained(folder)
    fresh = type(config)()
    assert (fresh.hidden_size, fresh.min_timescale, fresh.max_timescale) == (1280, 1, 10000)  # the reader's defaults
    torch.manual_seed(0)
    model = TimesFmModel(config).eval()
    seen = {}
    for name in ("input_ff_layer", "freq_emb"):
        model.get_submodule(name).register_forward_hook(lambda _m, _a, out, name=name: seen.__setitem__(name, out.double().clone()))
    model.layers[0].register_forward_pre_hook(
        lambda _m, args, kwargs: seen.__setitem__("layer", (args or (kwargs["hidden_states"],))[0].double().clone()),
        with_kwargs=True)
    rng = np.random.default_rng(0)
    padding = np.zeros((2, 36), np.float32)
    padding[1, :10] = 1
    with torch.no_grad():
        model(past_values=torch.from_numpy(rng.standard_normal((2, 36)).astype(np.float32)),
              past_values_padding=torch.from_numpy(padding), freq=torch.tensor([[0], [2]]))
    added = (seen["layer"] - seen["input_ff_layer"] - seen["freq_emb"]).numpy()
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    x = rng.standard_normal(added.shape)
    rolled = {"x": x, "position_ids": (np.arange(9)[None] - np.array([[0], [2]])) % 9}
    assert np.max(np.abs(encoding.reference(p, rolled) - (x + added))) < 1e-5
    unrolled = {"x": x, "position_ids": np.tile(np.arange(9), (2, 1))}
    assert np.max(np.abs(encoding.reference(p, unrolled) - (x + added))) > 0.5
    assert recipe_problem(plan.manifest_entry(role)) == ""  # parity's hf runtime runs it and agrees
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    assert np.max(np.abs(session.run(rolled) - encoding.reference(p, rolled))) < 1e-5
    cli_build(folder, None, {}, tmp_path / "graphs", None, backend="portable")
    (graph,) = sorted((tmp_path / "graphs").glob("*.onnx"))
    report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
    assert any(r.runtime == "hf" for r in report.results) and all(r.status == "pass" for r in report.results)


@pytest.mark.parametrize("values, needle", [
    ({}, r"'use_positional_embedding' = false: TimesFM then adds no position code"),
    ({"use_positional_embedding": True, "min_timescale": 2}, r"'min_timescale' = 2: scales every frequency"),
])
def test_timesfm_without_its_form_is_refused_in_one_line(tmp_path, values, needle):
    """No positional embedding (the default), or frequencies scaled by min_timescale: one PosexportError naming the key."""
    from posexport.errors import PosexportError

    folder = zoo.tiny("timesfm", tmp_path / "timesfm", **values)
    with pytest.raises(PosexportError, match=needle) as raised:
        read_model(folder)
    assert "\n" not in str(raised.value)
