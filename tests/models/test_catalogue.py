"""The catalogue against transformers' own registry and code: every model type of CONFIG_MAPPING sorted
into read / no positional encoding / not yet; every read rope type's tiny config (saved by transformers'
config class) read, its float64 frequencies against the rotary module's own inv_freq and its graph's
reference against the `hf` runtime (the model's rotary class and apply function) with the model-agreement
bound; layer plans against the attention layers transformers builds; every such type's built graphs
through `parity --from-model`; docs/models.md's generated section current."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from posexport.dtypes import DTYPES  # noqa: E402
from posexport.models import READERS, catalogue, decoders, deepseek, oracle, read_model  # noqa: E402
from posexport.models.cli import build as cli_build, lines as build_lines  # noqa: E402
from posexport.models.oracle import model_bound, recipe_problem  # noqa: E402
from posexport.registry import get_encoding  # noqa: E402
from posexport.rope import mrope, scaling  # noqa: E402
from posexport.verdicts.from_model import run_model_parity  # noqa: E402

import zoo  # noqa: E402
from ..sampling import stratified  # noqa: E402
from ..harness import Built, feeds_for, model_frequencies, normalised_error, registry_types, rotations_in_transformers  # noqa: E402


# Readers that need a config only (the others read trained tables: tests/test_models_hf.py builds those).
CONFIG_READERS = ("decoders", "llama", "falcon", "phi3", "neox", "glm", "wrapper", "qwen_vl", "llama4", "gptj", "moonshine", "gemma4", "deepseek", "roformer", "zamba2",
                  "recurrent_gemma")


# Wrappers whose text model reads trained tables (tested on their own, below).
TABLE_WRAPPERS = ("florence2",)


ROPE_TYPES = sorted(t for t, r in READERS.items() if r in CONFIG_READERS and t not in TABLE_WRAPPERS)


# Named as wanted and read (docs/models.md): the list of 2025–26 architectures.
NAMED = ("qwen3_vl", "llama4", "gptj", "moonshine", "gemma4", "gemma3n", "cohere", "cohere2", "granite", "olmo2", "olmo3", "smollm3", "ministral3", "mistral3", "deepseek_v3",
         "gpt_oss", "gemma3", "modernbert", "falcon_h1", "qwen3_next", "ernie4_5", "exaone4", "hunyuan_v1_dense",
         "seed_oss", "apertus", "lfm2", "helium")


# Named and not read yet, each with its reason in catalogue.NOT_YET_TYPES (none left).
NAMED_PENDING: tuple[str, ...] = ()


def rope_form(model_type: str) -> tuple:
    """What a config-read type's reading exercises: its reader, the encodings the catalogue says it builds, and
    for a rope decoder or MLA line the switches of its line (a wrapper: its reader alone; its text model is
    walked as its own type)."""
    reader = READERS[model_type]
    if reader == "wrapper":
        return (reader,)
    line = decoders.DECODERS.get(model_type) if reader == "decoders" else deepseek.MLA.get(model_type) \
        if reader == "deepseek" else None
    switches = tuple(v for k, v in vars(line).items() if k not in SPECIFIC) if line else ()
    return reader, catalogue.encodings_of(model_type), *map(repr, switches)


# A line's values that differ per type without changing the form read (the walk's sample ignores them).
SPECIFIC = {"module", "prefix", "max_positions", "theta", "head_dim", "notes", "partial", "theta_without_block", "block"}


# `make test`: one type per form, and the named ones (`make test-all`: every type).
PARITY_TYPES = stratified(ROPE_TYPES, rope_form, always=NAMED)


def test_the_registry_walk_sorts_every_model_type():
    entries = catalogue.survey(registry_types())
    assert {e.status for e in entries} <= {catalogue.READ, catalogue.NO_POSITIONS, catalogue.NOT_YET}
    status = {e.model_type: e.status for e in entries}
    assert all(status[t] == catalogue.READ for t in NAMED), [t for t in NAMED if status[t] != catalogue.READ]
    assert all(status[t] == catalogue.NOT_YET and t in catalogue.NOT_YET_TYPES for t in NAMED_PENDING)
    # Every type not read says why in its own words, and every reason names a type of the registry.
    assert [t for t, s in status.items() if s == catalogue.NOT_YET and t not in catalogue.NOT_YET_TYPES] == []
    assert set(catalogue.NOT_YET_TYPES) <= set(status)
    assert all(e.text and "\n" not in e.text for e in entries)
    # issue 21: no type waits "in reach" (a form posexport models) without its reader line.
    assert [t for t, why in catalogue.NOT_YET_TYPES.items() if why.startswith("in reach")] == []
    counts = {s: sum(v == s for v in status.values()) for s in set(status.values())}
    assert counts[catalogue.READ] >= 150 and counts[catalogue.NO_POSITIONS] >= 50


POSITION_CODE = re.compile(r"class \w*RotaryEmbedding|self\.(position_embeddings|embed_positions|wpe|pos_embed\w*)\s*="
                           r"|relative_attention_bias|relative_position_bias|alibi")


# Towers whose modeling module also holds their model's other parts (a text model's rotary): the source scanned is
# their own classes' (by name prefix).
TOWER_CLASSES = {"gemma4_unified_audio": "Gemma4UnifiedMultimodalEmbedder", "inkling_audio": "InklingAudioModel",
                 "muse_spark_audio": "MuseSparkAudio", "blip_2_qformer": "Blip2QFormer",
                 "qwen2_5_omni_bigvgan": "Qwen2_5OmniToken2WavBigVGAN",
                 "idefics2_perceiver": "Idefics2Perceiver", "idefics_perciever": "IdeficsPerceiver"}


def modeling_source(model_type: str) -> str:
    import importlib
    import inspect

    import transformers
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(model_type)
    if model_type in TOWER_CLASSES:
        module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
        # classes of its package (IDEFICS keeps its perceiver in a file of its own)
        return "\n".join(inspect.getsource(c) for n, c in vars(module).items() if isinstance(c, type)
                         and c.__module__.startswith(f"transformers.models.{name}.") and n.startswith(TOWER_CLASSES[model_type]))
    folder = Path(transformers.__file__).parent / "models" / name
    return "\n".join(f.read_text() for f in folder.glob("modeling_*.py"))


def test_types_without_positional_encoding_have_no_position_code():
    named = [t for t in catalogue.NO_POSITION_TYPES if t in set(registry_types())]
    assert len(named) >= 50
    found = {t: POSITION_CODE.search(modeling_source(t)) for t in named}
    assert not {t: m.group(0) for t, m in found.items() if m}
    assert POSITION_CODE.search(modeling_source("llama")) and POSITION_CODE.search(modeling_source("t5"))
    assert all(t in named and "class" in modeling_source(t) for t in TOWER_CLASSES)  # their classes were found


@pytest.mark.parametrize("model_type", ROPE_TYPES)
def test_every_read_type_agrees_with_transformers(tiny_models, model_type):
    plan = read_model(tiny_models[model_type])
    assert plan.roles
    rng = np.random.default_rng(0)
    for role in plan.roles:
        encoding = get_encoding(role.encoding)
        p = encoding.params(**role.values)
        assert recipe_problem(plan.manifest_entry(role)) == ""  # the hf runtime accepts the recipe
        session = oracle.session(Built(encoding, p, plan.manifest_entry(role)), plan.manifest_entry(role))
        if role.encoding == "rope":  # float64 frequencies against the model's own rope init
            theirs, their_factor = model_frequencies(session, role)
            ours, factor = scaling.frequencies(p)
            assert np.max(np.abs(ours - theirs)) <= 1e-6 * np.max(theirs), role.role
            assert abs(factor - their_factor) < 1e-6
        if role.encoding == "mrope" and not p.axial:  # the text rotary's frequencies (GLM-4V's: over rotary_dim)
            theirs = session.rotary.inv_freq.double().numpy()
            assert np.max(np.abs(mrope.inv_freq(p) - theirs)) <= 1e-6 * np.max(theirs), role.role
        for feeds in feeds_for(encoding, p, rng):
            exact = encoding.reference(p, feeds)
            error = normalised_error(session.run(feeds), exact)
            largest = int(feeds["position_ids"].max()) if "position_ids" in feeds else 0
            assert error < model_bound(DTYPES["float32"].bound(largest), largest), (role.role, error)


def rope_flags_of_transformers(folder: Path) -> list[bool]:
    """Per decoder layer, whether transformers' own model calls its apply function there."""
    return [rotated is not None for rotated in rotations_in_transformers(folder)]


def plan_mismatches(folder: Path, model: Path) -> list[int]:
    plan = read_model(folder)
    return [i for i, uses in enumerate(rope_flags_of_transformers(model)) if (plan.layer_rope(i) is not None) != uses]


@pytest.mark.parametrize("model_type, nope", [("smollm3", [3]), ("cohere2", [3]), ("exaone4", [3]), ("llama4_text", [3]),
                                             ("cohere2_moe", [3]), ("flint", [0, 1, 3]), ("beam", [3]),
                                             ("mllama_text_model", [3]), ("mllama", [3]), ("olmo_hybrid", [0, 1, 2]),
                                             ("qwen3_next", [0, 1, 2]), ("granite_swa", [1]), ("muse_spark_text", [3]),
                                             ("muse_spark", [3]), ("muse_glimmer_text", [1]), ("muse_glimmer", [3]),
                                             ("zamba2", [0, 2]), ("recurrent_gemma", [0, 1, 3]),
                                             ("bailing_hybrid", [0, 2]), ("hy_v4", []), ("mistral4", []),
                                             ("kolibri1", [4]), ("kolibri1_1", [4]), ("ergo", [3])])
def test_nope_plans_match_transformers_layer_by_layer(tiny_models, tmp_path, model_type, nope):
    folder = tiny_models[model_type]
    plan = read_model(folder)
    assert [lp.layer for lp in plan.layer_plan() if lp.rope is None] == nope
    assert plan_mismatches(folder, folder) == []
    # The verdict fails a plan read backwards (onnxruntime's builder read SmolLM3's flags so).
    if model_type == "smollm3":
        backwards = zoo.tiny("smollm3", tmp_path / "backwards", no_rope_layers=[0, 1, 1, 1])
        assert plan_mismatches(backwards, folder) == [0, 3]


# Every config-read type under `make test-all`, one per form under `make test` (every rope form among them: interleaved pairs, NoPE layers, per-layer-type ropes, query
# scaling, YaRN truncate false, proportional, wrappers, M-RoPE, M-RoPE on a partial rotary) built and judged as a user would: about 0.1 s each.
@pytest.mark.parametrize("model_type", PARITY_TYPES)
def test_every_config_read_type_builds_and_passes_parity_from_model(tiny_models, tmp_path, model_type):
    lines = build_lines(cli_build(tiny_models[model_type], None, {}, tmp_path, None, backend="portable"))
    # The layer plan, or (a config with no layer count: LongCat-Flash's paired sublayers, Moonshine's two stacks) its one rope for all.
    assert any(line.startswith("plan: ") or line.endswith("used by every layer") for line in lines), lines
    for graph in sorted(tmp_path.glob("*.onnx")):
        report = run_model_parity(tiny_models[model_type], graph, ["ort-cpu"], seqs=(17,), batches=(2,), properties=False)
        bad = [(r.case, r.runtime, r.message) for r in report.results if r.status != "pass"]
        assert not bad and any(r.runtime == "hf" for r in report.results), bad


def test_models_page_lists_the_generated_catalogue():
    page = (Path(__file__).parents[2] / "docs" / "models.md").read_text()
    section = catalogue.render(catalogue.registry_survey(), importlib.metadata.version("transformers"))
    assert section in page, "docs/models.md is stale: run python -m posexport.models.catalogue docs/models.md"


def test_list_models_prints_the_catalogue_with_encodings():
    from typer.testing import CliRunner

    from posexport_cli import main as posexport_cli

    result = CliRunner().invoke(posexport_cli.app, ["list", "--models"], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows: dict[str, str] = {}
    for line in (line for line in result.output.splitlines() if line.count("│") == 3):
        name, text = (cell.strip() for cell in line.split("│")[1:3])
        if name:
            rows[name], last = text, name
        else:  # a wrapped cell continues the row above
            rows[last] += " " + text
    assert rows["cohere"] == "rope, interleaved pairs" and rows["smollm3"] == "rope, NoPE layers"
    assert rows["modernbert"] == "rope per layer type" and set(rows) == set(READERS)


def test_audio_embedders_without_positions_carry_none(tmp_path):
    """Gemma-4-Unified's and Inkling's audio embedders, built by transformers from tiny configs: the frames of a
    random input in a shuffled order give the same outputs shuffled (each frame mapped alone), which the same
    outputs plus a sinusoid over the frames do not; Muse-Spark's causal convolutions: a random waveform behind a
    random prefix of 3 tokens gives, past the convolutions' reach, the waveform's own outputs 3 tokens later."""
    import torch
    from transformers.models.gemma4_unified import modeling_gemma4_unified as gemma
    from transformers.models.inkling import modeling_inkling as inkling
    from transformers.models.muse_spark import modeling_muse_spark as muse

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    text = zoo.config_class("gemma4_unified_text")(hidden_size=16)
    embedders = [
        (gemma.Gemma4UnifiedMultimodalEmbedder(zoo.config_class("gemma4_unified_audio")(audio_embed_dim=8), text),
         torch.from_numpy(rng.standard_normal((1, 12, 8)).astype(np.float32))),
        (inkling.InklingAudioModel(zoo.config_class("inkling_audio")(n_mel_bins=4, mel_vocab_size=8, text_hidden_size=16)),
         torch.from_numpy(rng.integers(0, 8, (1, 12, 4)))),
    ]
    order = torch.from_numpy(rng.permutation(12))
    sinusoid = get_encoding("sinusoidal")
    table = sinusoid.params(d_model=16)
    for embedder, frames in embedders:
        with torch.no_grad():
            out, shuffled = (embedder.eval()(f) for f in (frames, frames[:, order]))
        out, shuffled = (getattr(o, "last_hidden_state", o).double().numpy() for o in (out, shuffled))
        assert np.max(np.abs(shuffled - out[:, order.numpy()])) < 1e-6
        positioned = [sinusoid.reference(table, {"x": o, "position_ids": np.arange(12)[None]}) for o in (out, shuffled)]
        assert np.max(np.abs(positioned[1] - positioned[0][:, order.numpy()])) > 0.1
    config = zoo.config_class("muse_spark_audio")(patch_sizes=[2, 2], hidden_sizes=[8, 16], depths=[1, 1],
                                                       num_hidden_layers=2, conv_kernel_size=3, out_hidden_size=16)
    model = muse.MuseSparkAudioModel(config).eval()
    wave = torch.from_numpy(rng.standard_normal((1, 4 * 12)).astype(np.float32))
    prefix = torch.from_numpy(rng.standard_normal((1, 4 * 3)).astype(np.float32))
    with torch.no_grad():
        alone, behind = (model(w).last_hidden_state.double().numpy() for w in (wave, torch.cat([prefix, wave], 1)))
    assert alone.shape == (1, 12, 16) and np.max(np.abs(behind[:, 3 + 4:] - alone[:, 4:])) < 1e-5
