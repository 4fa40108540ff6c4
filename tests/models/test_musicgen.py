"""MusicGen: its decoder's own sinusoid; an odd width refused."""

from __future__ import annotations

from pathlib import Path

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


MUSICGEN = {"musicgen_decoder": ("musicgen", "MusicgenModel", "MusicgenSinusoidalPositionalEmbedding"),
            "musicgen_melody_decoder": ("musicgen_melody", "MusicgenMelodyModel", "MusicgenMelodySinusoidalPositionalEmbedding")}


MUSICGEN_SIZES = {"hidden_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4, "ffn_dim": 64, "vocab_size": 32,
                  "num_codebooks": 2, "max_position_embeddings": 12, "pad_token_id": 31, "bos_token_id": 31}


def musicgen_folder(model_type: str, folder: Path) -> Path:
    """A tiny decoder config, or a whole model's (a tiny decoder beside T5's and EnCodec's default configs)."""
    from transformers import AutoConfig

    from posexport.models import musicgen

    decoder = zoo.config_class(musicgen.COMPOSITES.get(model_type, model_type))(**MUSICGEN_SIZES)
    config = decoder if model_type in musicgen.DECODERS else zoo.config_class(model_type)(
        text_encoder=AutoConfig.for_model("t5").to_dict(), audio_encoder=AutoConfig.for_model("encodec").to_dict(),
        decoder=decoder.to_dict())
    config.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("model_type", ["musicgen_decoder", "musicgen_melody_decoder", "musicgen", "musicgen_melody"])
def test_musicgen_sinusoid_is_its_decoders_own(tmp_path, model_type):
    """transformers' own tiny decoder on a forward of 9 steps (Melody: 4 conditioning states before 5 audio
    steps): what its embed_positions returns, and what the same module returns continued from a cache of 7
    (past its 12 initial rows), is the graph's [cos | sin] reference at those 0-based positions; the hf
    runtime's table agrees, and so does the graph built from the folder (parity --from-model); the same table
    laid out sines first misses by order 1."""
    import importlib

    import torch

    from posexport import export
    from posexport.models import musicgen

    decoder_type = musicgen.COMPOSITES.get(model_type, model_type)
    module_name, model_class, embedding_class = MUSICGEN[decoder_type]
    assert {k: getattr(zoo.config_class(decoder_type)(), k) for k in ("hidden_size", "max_position_embeddings")} \
        == {"hidden_size": 1024, "max_position_embeddings": 2048}  # the reader's defaults are the config class's
    folder = musicgen_folder(model_type, tmp_path / model_type)
    modeling = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    torch.manual_seed(0)
    model = getattr(modeling, model_class)(zoo.config_class(decoder_type)(**MUSICGEN_SIZES)).eval()
    embed = model.decoder.embed_positions
    assert type(embed).__name__ == embedding_class
    added = []
    embed.register_forward_hook(lambda _m, _a, rows: added.append(rows.double().numpy()))
    rng = np.random.default_rng(0)
    tokens = torch.from_numpy(rng.integers(0, 31, (2, 9 if decoder_type == "musicgen_decoder" else 5)))
    conditioning = {} if decoder_type == "musicgen_decoder" else \
        {"encoder_hidden_states": torch.from_numpy(rng.standard_normal((1, 4, 48)).astype(np.float32))}
    with torch.no_grad():
        model(input_ids=tokens, **conditioning)
        embed(torch.zeros((1, 9, 48)) if decoder_type != "musicgen_decoder" else tokens[None], cache_length=7)
    plan = read_model(folder)
    (role,) = plan.roles
    encoding = get_encoding(role.encoding)
    p = encoding.params(**role.values)
    x = rng.standard_normal((1, 9, 48))
    for rows, start in zip(added, (0, 7)):
        feeds = {"x": x, "position_ids": np.arange(9)[None] + start}
        assert rows.shape == (9, 48) and np.max(np.abs(encoding.reference(p, feeds) - (x + rows))) < 1e-5
        sines_first = encoding.reference(encoding.params(**{**role.values, "pair_layout": "concat"}), feeds)
        assert np.max(np.abs(sines_first - (x + rows))) > 0.5
    assert recipe_problem(plan.manifest_entry(role)) == ""  # parity's hf runtime runs it and agrees
    session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
    assert np.max(np.abs(session.run(feeds) - encoding.reference(p, feeds))) < 1e-5
    cli_build(folder, None, {}, tmp_path / "graphs", None, backend="portable")
    (graph,) = sorted((tmp_path / "graphs").glob("*.onnx"))
    wrong, _ = export.save(export.build("sinusoidal", {**role.values, "pair_layout": "concat"}, backend="portable"),
                           tmp_path / "wrong", "sines-first")
    for onnx_path, status in ((graph, "pass"), (wrong, "fail")):
        report = run_model_parity(folder, onnx_path, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
        hf = [r.status for r in report.results if r.runtime == "hf"]
        assert hf and set(hf) == {status}, (onnx_path.name, hf)
        assert status == "fail" or all(r.status == "pass" for r in report.results)


def test_musicgen_odd_width_is_refused_in_one_line(tmp_path):
    """The model zero-pads an odd hidden_size's last channel: reading one is a single PosexportError naming the key."""
    from posexport.errors import PosexportError

    folder = tmp_path / "odd"
    zoo.config_class("musicgen_decoder")(**{**MUSICGEN_SIZES, "hidden_size": 47}).save_pretrained(folder)
    with pytest.raises(PosexportError, match=r"'hidden_size' = 47: the model zero-pads") as raised:
        read_model(folder)
    assert "\n" not in str(raised.value)
