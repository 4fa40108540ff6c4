"""Time-series transformers: each part's own sinusoid; Autoformer's label past the context refused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.models import oracle, read_model  # noqa: E402
from posexport.models.oracle import recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built  # noqa: E402


TIME_SERIES_SIZES = {"prediction_length": 3, "context_length": 6, "lags_sequence": [1, 2], "num_time_features": 1,
                     "d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
                     "decoder_attention_heads": 2, "encoder_ffn_dim": 16, "decoder_ffn_dim": 16}


@pytest.mark.parametrize("model_type", ["time_series_transformer", "informer", "autoformer"])
def test_time_series_sinusoid_is_each_parts_own(tmp_path, model_type):
    """transformers' own tiny encoder-decoder on a forward of random series and time features: the rows its
    encoder's and decoder's embed_positions return are the graph's reference at the position_ids the reader
    says (the encoder from 0, the decoder from context_length, Autoformer's from context_length − label_length);
    taking Autoformer's decoder from context_length, as the others', misses; the hf runtime's table agrees."""
    import torch
    from transformers import AutoModel

    folder = zoo.tiny(model_type, tmp_path / model_type, **TIME_SERIES_SIZES,
                           **({"label_length": 4} if model_type == "autoformer" else {}))
    config = zoo.config_class(model_type).from_pretrained(folder)
    assert zoo.config_class(model_type)(prediction_length=3).d_model == 64  # the reader's default
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    added = {}
    for part in ("encoder", "decoder"):
        model.get_submodule(f"{part}.embed_positions").register_forward_hook(
            lambda _m, _a, rows, part=part: added.__setitem__(part, rows.double().numpy()))
    rng = np.random.default_rng(0)
    series = {name: torch.from_numpy(rng.standard_normal(shape).astype(np.float32)) for name, shape in (
        ("past_values", (1, 8)), ("past_time_features", (1, 8, 1)), ("future_values", (1, 3)), ("future_time_features", (1, 3, 1)))}
    with torch.no_grad():
        model(**series, past_observed_mask=torch.ones(1, 8))
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    start = 2 if model_type == "autoformer" else 6
    for part, first in (("encoder", 0), ("decoder", start)):
        rows = added[part]
        x = rng.standard_normal((1, len(rows), 16))
        feeds = {"x": x, "position_ids": np.arange(len(rows))[None] + first}
        assert np.max(np.abs(encoding.reference(p, feeds) - (x + rows))) < 1e-6, part
    assert f"the decoder's {start} onwards" in role.notes[0]  # what the reader tells the graph's user
    if model_type == "autoformer":
        feeds = {"x": x, "position_ids": np.arange(len(rows))[None] + 6}
        assert np.max(np.abs(encoding.reference(p, feeds) - (x + added["decoder"]))) > 0.1
    assert recipe_problem(plan.manifest_entry(role)) == ""  # parity's hf runtime runs it and agrees
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    assert np.max(np.abs(session.run(feeds) - encoding.reference(p, feeds))) < 1e-5


def test_autoformer_label_past_the_context_is_refused_in_one_line(tmp_path):
    """label_length > context_length would start the decoder at a negative row: one PosexportError naming the key."""
    from posexport.errors import PosexportError

    folder = zoo.tiny("autoformer", tmp_path / "autoformer", **{**TIME_SERIES_SIZES, "label_length": 7})
    with pytest.raises(PosexportError, match=r"'label_length' = 7: the decoder's positions would start at .* -1") as raised:
        read_model(folder)
    assert "\n" not in str(raised.value)
