"""Composite folders (posexport/models/composite.py): each composite's tiny model built by transformers from
its own config class, its position tables random and saved under the names the composite's model gives them;
every role against the composite model's own modules (the table rows its text tower adds on a forward, its
vision embeddings' interpolate_pos_encoding, its parts' rotary frequencies) and against the part's own code in
the hf runtime, float64 references on random inputs; CLIP through `parity --from-model`, and a misread (its
text table built from the vision tower's key) failing there."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.contract import Case  # noqa: E402
from posexport.dtypes import DTYPES  # noqa: E402
from posexport.errors import PosexportError  # noqa: E402
from posexport.models import composite, learned, read_model, sinusoids  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402
from posexport.models.cli import build as cli_build, lines as build_lines  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import scaling  # noqa: E402
from posexport.models import oracle  # noqa: E402
from posexport.models.oracle import model_bound, recipe_problem  # noqa: E402

from safetensors.numpy import save_file  # noqa: E402

import zoo  # noqa: E402
from ..harness import Built, START, feeds_for, normalised_error, own_model, processor_patches, rows_the_table_adds  # noqa: E402

# Part sizes the tiny defaults do not fit: CLAP's Swin stages take per-stage heads, ModernBERT's token ids
# need its own vocabulary.
PART_SIZES = {
    "clap_audio_model": {"depths": [1, 1], "num_attention_heads": [2, 4], "window_size": 4, "spec_size": 64,
                         "hidden_size": 64, "patch_embeds_hidden_size": 16},
    "esm": {**zoo.sized(zoo.config_class("esm"), "esm"), "pad_token_id": 1},  # its table counts from pad + 1
    "modernbert": {**zoo.sized(zoo.config_class("modernbert"), "modernbert"), "vocab_size": 50368},
    # π0.5's VLM: its text model and vision tower tiny (PaliGemma's default tower has 400 M parameters)
    "paligemma": {"text_config": {"model_type": "gemma", **zoo.sized(zoo.config_class("gemma"), "gemma")},
                  "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 32,
                                    "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
                  "projection_dim": 64},
}
# BLT's hash embeddings (500002 rows by default); Fun-ASR-Nano's adaptor sized to its text model
TOP_SIZES = {"blt": {"encoder_hash_byte_group_vocab": 64}, "kosmos-2.5": {"latent_query_num": 8},
             "fun_asr_nano": {"adaptor_config": {"hidden_size": 64, "intermediate_size": 16}}}
TABLES = r"position_embedding|relative_position_bias_table|relative_attention_bias|embed_positions|wpe|row_embedder|column_embedder"
# Composites whose parts are any read types: the pair each is built with when a test names none (TrOCR's).
DEFAULT_TYPES = {"encoder-decoder": {"encoder": "bert", "decoder": "gpt2"},
                 "vision-encoder-decoder": {"encoder": "vit", "decoder": "trocr"}}
# transformers' class of a composite that AutoModel does not build
MODEL_CLASSES = {
                 # the thinkers as generation checkpoints hold them (its parts under `model.`)
                 "qwen2_5_omni_thinker": "Qwen2_5OmniThinkerForConditionalGeneration",
                 "qwen3_omni_moe_thinker": "Qwen3OmniMoeThinkerForConditionalGeneration",
                 "qwen2_5_omni": "Qwen2_5OmniForConditionalGeneration", "qwen2_5_omni_token2wav": "Qwen2_5OmniToken2WavModel",
                 "pix2struct": "Pix2StructForConditionalGeneration",
                 "pi05": "PI05ForConditionalGeneration",  # its policy checkpoints hold both parts under `model.`
                 "encoder-decoder": "EncoderDecoderModel",
                 "vision-encoder-decoder": "VisionEncoderDecoderModel"}


def tiny_parts(model_type: str, types: dict[str, str] | None = None) -> dict[str, dict]:
    """Each part's config at the tiny sizes (``types``: the type of a part its config class leaves to AutoConfig,
    else its default); a part that is a composite itself has its own parts tiny."""
    cls = zoo.config_class(model_type)
    parts = {}
    for part in composite.COMPOSITES[model_type].parts:
        inner = part.model_type or (types or DEFAULT_TYPES.get(model_type, {})).get(part.key) \
            or cls.sub_configs_defaults[part.key].model_type
        sizes = (tiny_parts(inner) if inner in composite.COMPOSITES else
                 PART_SIZES.get(inner, zoo.sized(zoo.config_class(inner), inner)))
        parts[part.key] = {"model_type": inner, **sizes, **TOP_SIZES.get(inner, {})}
    return parts


def tiny_composite(model_type: str, folder: Path, types: dict[str, str] | None = None):
    """config.json of the composite (each part at the tiny sizes; ``types``: the type of a part its config class
    leaves to AutoConfig, else its default) and model.safetensors holding the position tables of transformers'
    own composite model, random, under that model's names; returns the model holding them."""
    import re

    import torch
    import transformers
    from transformers import AutoConfig

    cls = zoo.config_class(model_type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parts = tiny_parts(model_type, types)
        cls(**parts, **TOP_SIZES.get(model_type, {})).save_pretrained(folder)
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(folder)
    model_class = getattr(transformers, MODEL_CLASSES.get(model_type, "AutoModel"))
    model = (model_class.from_config if model_class.__name__.startswith("Auto") else model_class)(config).eval()
    rng = np.random.default_rng(0)
    tables = {name: rng.standard_normal(tuple(p.shape)).astype(np.float32)
              for name, p in model.named_parameters() if re.search(TABLES, name)}
    if tables:
        save_file(tables, str(folder / "model.safetensors"))
        model.load_state_dict({k: torch.from_numpy(v) for k, v in tables.items()}, strict=False)
    return model


def part_of(model_type: str, role, config) -> tuple[composite.Part, object]:
    """The part a role comes from (the innermost, where a part is a composite itself), its module the whole path
    within the composite's model, and its sub-config."""
    line, modules = composite.COMPOSITES[model_type], []
    for key in role.hf.part.split("."):
        part = next(p for p in line.parts if p.key == key)
        modules.append(part.module)
        config = getattr(config, key)
        line = composite.COMPOSITES.get(config.model_type, line)
    return dataclasses.replace(part, module=".".join(modules)), config


def hf_session(plan, role, p):
    entry = plan.manifest_entry(role)
    assert recipe_problem(entry) == ""  # the hf runtime accepts the recipe
    return oracle.session(Built(get_encoding(role.encoding), p, entry), entry)


def rows_the_tower_adds(model, part, role, sub) -> tuple[np.ndarray, np.ndarray]:
    """(position_ids, the rows) the composite's own part adds on a forward: 9 tokens of a text tower, the
    patches of a vision tower at its input size, or a Pix2Struct-style tower's 5 × 7 patches and 3 padding patches
    at the 1-based ids of the role's column (row: 0, column: 1) (a hook on the table's module)."""
    import torch

    module = model.get_submodule(role.values["key"].removesuffix(".weight"))
    added = []
    module.register_forward_hook(lambda _m, _a, rows: added.append(rows.reshape(-1, rows.shape[-1])))
    if hasattr(sub, "patch_embed_hidden_size"):
        flattened = processor_patches(sub, 5, 7, 3, np.random.default_rng(1))
        with torch.no_grad():
            model.get_submodule(part.module)(flattened_patches=torch.from_numpy(flattened))
        column = 0 if role.role.endswith("-row-learned") else 1
        return flattened[..., column].astype(np.int64), added[0].double().numpy()[None]
    if not hasattr(sub, "image_size"):  # a text tower, or a decoder (a BART-like table: 0-based, its offset its own)
        tokens = [i for i in range(2, 64) if i != getattr(sub, "pad_token_id", None)][:9]
        inputs = {"input_ids": torch.tensor([tokens])}
        # ESM's absolute table (esm.py) counts from padding_idx + 1, as RoBERTa's
        kind = learned.FROM_PADDING if sub.model_type == "esm" else learned.TABLES.get(sub.model_type, (None,) * 4)[3]
        start = START[kind](sub) if kind else 0
    else:
        pixels = torch.from_numpy(np.random.default_rng(1).standard_normal((1, 3, sub.image_size, sub.image_size)))
        inputs, start = {"pixel_values": pixels.float()}, 0
    with torch.no_grad():
        model.get_submodule(part.module)(**inputs)
    rows = added[0].double().numpy()
    return np.arange(len(rows))[None] + start, rows[None]


def role_feeds(encoding, p, rng) -> list[dict[str, np.ndarray]]:
    """Random feeds: a grid encoding at its trained grid, smaller and larger; a table's first and last rows;
    a rope's positions from 0 and from 5000; a window bias's scores; a T5 bias over keys past max_distance."""
    if encoding.name == "swin":  # scores of one window
        tokens = p.window_h * p.window_w
        return [{"scores": rng.standard_normal((2, p.heads, tokens, tokens)).astype(np.float32)}]
    if encoding.family == "vision":
        return feeds_for(encoding, p, rng, grids=((p.trained_h, p.trained_w), (3, 5), (11, 8)))
    if encoding.name == "t5":  # scores of 17 queries over 300 keys (past max_distance)
        return [encoding.feeds(p, Case("q17-k300", {"batch": 2, "q_len": 17, "k_len": 300}), DTYPES["float32"], rng)]
    if encoding.name == "learned":
        seq = min(17, p.rows)
        return [encoding.feeds(p, Case(f"at{s}", {"batch": 2, "seq": seq}, start=s), DTYPES["float32"], rng)
                for s in (0, p.rows - seq)]
    return feeds_for(encoding, p, rng)


@pytest.mark.parametrize("model_type, types", [
    *((t, None) for t in sorted(composite.COMPOSITES)),
    # parts of other types than its defaults (BERT, ViT): a RoBERTa table from padding_idx + 1, a CLIP vision tower
    ("vision-text-dual-encoder", {"text_config": "roberta", "vision_config": "clip_vision_model"}),
    ("blip-2", {"text_config": "t5"}),  # BLIP-2 on Flan-T5: T5's bias under its language model
    ("encoder-decoder", {"encoder": "esm", "decoder": "gpt2"}),  # ESM's table under `encoder.`, not GPT-2's
])
def test_composite_parts_agree_with_the_composites_own_model(tmp_path, model_type, types):
    """Every role a part's reader gives, renamed with the part's prefix, against the composite model's own module
    for that part and against the part's own code in the hf runtime (on the part's sub-config, the table read
    under the composite's name)."""
    model = tiny_composite(model_type, tmp_path / model_type, types)
    plan, config = read_model(tmp_path / model_type), model.config
    line = composite.COMPOSITES[model_type]
    tables = {t.role for t in line.tables}
    assert {r.role.split("-")[0] for r in plan.roles if r.role not in tables} == {p.role for p in line.parts}
    assert tables <= {r.role for r in plan.roles}
    names, rng = dict(model.named_parameters()), np.random.default_rng(0)
    for role in plan.roles:
        encoding = get_encoding(role.encoding)
        p = encoding.params(**role.values)
        session = hf_session(plan, role, p)
        if role.role in tables:  # the composite's own table, added whole as its module's forward adds it
            table = model.get_parameter(role.values["key"]).detach().double().numpy()
            x = rng.standard_normal(table.shape)
            positions = np.arange(table.shape[1])[None]
            assert np.max(np.abs(encoding.reference(p, {"x": x, "position_ids": positions}) - (x + table))) < 1e-6
        part, sub = part_of(model_type, role, config) if role.role not in tables else (None, None)
        if "key" in role.values:  # the composite's own table (of this part)
            assert role.values["key"] in names and role.values["key"].startswith(f"{part.module}." if part else ""), role
        if role.encoding == "learned" and part:
            positions, rows = rows_the_tower_adds(model, part, role, sub)
            x = rng.standard_normal(rows.shape)
            assert np.max(np.abs(encoding.reference(p, {"x": x, "position_ids": positions}) - (x + rows))) < 1e-6, role.role
        if role.encoding == "vit-learned":  # the composite's own embeddings module resamples its table
            table = role.hf.table
            session.embeddings = model.get_submodule(role.values["key"].removesuffix(f".{table}"))
        if role.encoding == "sinusoidal" and part.role == "text":  # the composite's own fairseq table (its `weights`)
            table = next(m for m in model.get_submodule(part.module).modules() if hasattr(m, "weights")).weights
            start = START[sinusoids.FAMILIES[part.model_type].start](sub)
            positions = np.arange(9)[None] + start
            x = rng.standard_normal((1, 9, table.shape[1]))
            ours = encoding.reference(p, {"x": x, "position_ids": positions})
            assert np.max(np.abs(ours - (x + table.double().numpy()[positions[0]]))) < 1e-5, role.role
        if role.encoding == "rope":  # the composite's own rotary module for the part: the frequencies the graph turns by
            rotary = next(m for m in model.get_submodule(part.module).modules()
                          if type(m).__name__.endswith("RotaryEmbedding"))
            prefix = f"{role.hf.layer_type}_" if role.hf.layer_type else ""
            theirs = getattr(rotary, f"{prefix}inv_freq").double().numpy()
            ours, factor = scaling.frequencies(p)
            assert np.max(np.abs(ours - theirs)) <= 1e-6 * np.max(theirs) and factor == 1.0, role.role
        for feeds in role_feeds(encoding, p, rng):
            exact = encoding.reference(p, feeds)
            error = normalised_error(session.run(feeds), exact)
            largest = int(feeds["position_ids"].max()) if "position_ids" in feeds else 0
            # a resampled grid: transformers' float32 bicubic, the vision towers' own bound (tests/models/test_vit.py)
            bound = 1e-5 if role.encoding == "vit-learned" else model_bound(DTYPES["float32"].bound(largest), largest)
            assert error < bound, (role.role, error)


def test_clip_passes_parity_from_model_and_a_misread_table_fails(tmp_path):
    """CLIP's two roles built as a user builds them and judged against CLIPModel's parts' own code; the text
    table built from the vision tower's key (a part reader looking outside its part) fails against it."""
    from posexport import export

    folder = tmp_path / "clip"
    tiny_composite("clip", folder)
    lines = build_lines(cli_build(folder, None, {}, tmp_path / "built", None, backend="portable"))
    graphs = sorted((tmp_path / "built").glob("*.onnx"))
    assert len(graphs) == 2, lines
    for graph in graphs:
        report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), bad
    plan = read_model(folder)
    text, vision = plan.role("text-learned"), plan.role("vision-vit-learned")
    grid_rows = vision.values["trained_h"] * vision.values["trained_w"] + 1
    wrong = export.build("learned", {**text.values, "key": vision.values["key"], "max_positions": grid_rows},
                         backend="portable")
    onnx_path, _ = export.save(wrong, tmp_path, "clip-text-from-vision")
    report = run_model_parity(folder, onnx_path, ["ort-cpu"], seqs=(17,), batches=(1,), properties=False)
    assert [r.status for r in report.results if r.runtime == "hf"] and all(
        r.status == "fail" for r in report.results if r.runtime == "hf")


PARITY_TYPES = sorted(set(composite.COMPOSITES) - {"clip"})


@pytest.mark.parametrize("model_type", PARITY_TYPES)
def test_composite_roles_build_and_pass_parity_from_model(tmp_path, model_type):
    """Every graph built from each composite's folder passes `parity --from-model` against its parts' own code."""
    folder = tmp_path / model_type
    tiny_composite(model_type, folder)
    cli_build(folder, None, {}, tmp_path / "built", None, backend="portable")
    for graph in sorted((tmp_path / "built").glob("*.onnx")):
        report = run_model_parity(folder, graph, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), bad


def test_the_registry_names_every_composite_line():
    from posexport.models import READERS

    assert composite.FAMILY.types == tuple(composite.COMPOSITES)
    assert all(READERS[t] == "composite" for t in composite.COMPOSITES)


def test_a_composite_part_of_another_type_is_refused_in_one_line(tmp_path):
    """CLIPModel builds its text_config as CLIPTextConfig whatever the sub-dict says: a text_config naming
    another type is refused, naming the key, not read as that type."""
    import json

    folder = tmp_path / "clip"
    tiny_composite("clip", folder)
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["model_type"] = "bert"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(PosexportError, match="'text_config'.*builds this part as clip_text_model") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


def test_a_part_key_the_part_does_not_read_is_refused(tmp_path):
    """A position key in a part's sub-config that its type's reader does not take stops the read, naming the part."""
    import json

    folder = tmp_path / "clip"
    tiny_composite("clip", folder)
    config = json.loads((folder / "config.json").read_text())
    config["vision_config"]["rope_theta"] = 10000.0
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(PosexportError, match="vision_config: clip_vision_model config key 'rope_theta'"):
        read_model(folder)


def test_a_composite_part_posexport_does_not_read_is_named_in_one_line(tmp_path):
    """A VisionTextDualEncoder whose vision tower is a type posexport does not read (Pixtral's 2-D rope tower):
    refused, naming the part and its type, nothing read of the other."""
    folder = tmp_path / "dual"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zoo.config_class("vision-text-dual-encoder")(
            text_config={"model_type": "bert"}, vision_config={"model_type": "pixtral"}).save_pretrained(folder)
    refused = "'vision_config.model_type' = .pixtral.: that part is not read: model_type 'pixtral' is not read yet: "
    with pytest.raises(PosexportError, match=refused) as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("decoder", ["mbart", "whisper"])
def test_a_decoder_read_as_a_whole_encoder_decoder_is_refused_alone(tmp_path, decoder):
    """A VisionEncoderDecoder's decoder is built as a causal LM alone (Donut's MBart): posexport reads its type
    as a whole encoder-decoder (both tables), so the folder is refused naming the decoder, not misread."""
    folder = tmp_path / "ved"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zoo.config_class("vision-encoder-decoder")(
            encoder={"model_type": "vit"}, decoder={"model_type": decoder}).save_pretrained(folder)
    rng = np.random.default_rng(0)  # the tables each reader looks up (Whisper's decoder table as WhisperForCausalLM names it)
    save_file({"encoder.embeddings.position_embeddings": rng.standard_normal((1, 197, 768)).astype(np.float32),
               "decoder.model.decoder.embed_positions.weight": rng.standard_normal((448, 1024)).astype(np.float32)},
              str(folder / "model.safetensors"))
    refused = f"'decoder.model_type' = .{decoder}.: posexport reads this type as a whole"
    with pytest.raises(PosexportError, match=refused) as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)


def test_fun_asr_nano_sinusoid_is_its_position_embeddings_own(tmp_path):
    """FunAsrNanoPositionEmbedding, built as the encoder builds it (max_position_embeddings rows of
    input_size channels): the rows it returns for 9 frames are the graph's reference at the reader's position_ids
    (from 1)."""
    import torch
    from transformers.models.fun_asr_nano.modeling_fun_asr_nano import FunAsrNanoPositionEmbedding

    folder = zoo.tiny("fun_asr_nano_encoder", tmp_path / "fun_asr", num_mel_bins=8, num_stacked_frames=2)
    config = zoo.config_class("fun_asr_nano_encoder").from_pretrained(folder)
    fresh, table = type(config)(), sinusoids.FAMILIES["fun_asr_nano_encoder"]
    assert {k: getattr(fresh, k) for k in table.defaults} == table.defaults
    with torch.no_grad():
        rows = FunAsrNanoPositionEmbedding(config.max_position_embeddings, config.input_size)(torch.zeros(1, 9, 16))
    (role,) = read_model(folder).roles
    encoding = get_encoding(role.encoding)
    x = np.random.default_rng(0).standard_normal((1, 9, 16))
    ours = encoding.reference(encoding.params(**role.values), {"x": x, "position_ids": np.arange(9)[None] + int(table.start)})
    assert role.values["d_model"] == config.input_size and np.max(np.abs(ours - (x + rows.double().numpy()))) < 1e-5


@pytest.mark.parametrize("model_type", ["instructblip_qformer", "instructblipvideo_qformer"])
def test_instructblip_qformer_table_is_added_to_its_text_alone(tmp_path, model_type):
    """With query embeddings before the instruction text, the rows the Q-Former's embeddings add are the
    table's from 0 over the text; numbered after the queries (a misread) they are not."""
    import torch

    folder = zoo.tiny(model_type, tmp_path / model_type, encoder_hidden_size=32)
    model = own_model(zoo.config_class(model_type).from_pretrained(folder)).eval()
    added = rows_the_table_adds(model, "embeddings.position_embeddings", folder, input_ids=torch.arange(4, 13)[None],
                                query_embeds=torch.randn(1, 4, 64), encoder_hidden_states=torch.randn(1, 5, 32))
    (role,) = read_model(folder).roles
    encoding = get_encoding(role.encoding)
    p, x = encoding.params(**role.values), np.random.default_rng(0).standard_normal((1, 9, 64))
    errors = [np.max(np.abs(encoding.reference(p, {"x": x, "position_ids": np.arange(9)[None] + start}) - (x + added)))
              for start in (0, 4)]
    assert errors[0] < 1e-6 and errors[1] > 0.1
