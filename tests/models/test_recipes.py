"""Typed recipes against manifests written before they were typed (tests/data/manifests: rope, mrope, query-scale,
learned, t5, swin, vit, navit, alibi and sinusoid recipes, kept as an earlier build wrote them): each reads as its
kind's recipe, writes back the same keys but those at their defaults, and drives the hf runtime; a recipe naming
code that is not transformers', or a field of the wrong type, is refused in one line."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from posexport import export, verdicts  # noqa: E402
from posexport.models import read_model  # noqa: E402
from posexport.models.build import build_model  # noqa: E402
from posexport.models.oracle import RECIPES, Hf, recipe_problem  # noqa: E402
from posexport.models.recipes import RecipeError, RopeRecipe  # noqa: E402

import zoo  # noqa: E402
from ..harness import with_weights  # noqa: E402

MANIFESTS = Path(__file__).parents[1] / "data" / "manifests"
OLD = sorted(MANIFESTS.glob("*.json"))
# Folders a config alone makes (their graphs are byte for byte those the manifests were written beside), and folders
# with trained tables (rebuilt with other weights: the old recipe judges the new graph).
CONFIG_ONLY = ("llama", "gemma3_text", "ministral3", "qwen2_vl", "codegen", "granite_swa")
TABLES = ("gpt2", "opt", "bart", "switch_transformers", "idefics3_vision")


def old(name: str) -> dict:
    return json.loads((MANIFESTS / name).read_text())


def test_the_kept_manifests_cover_the_recipe_kinds():
    kinds = {old(p.name)["model"]["hf"]["kind"] for p in OLD}
    assert kinds == {"rope", "vision-rope", "query-scale", "learned", "t5", "swin", "vit", "navit", "alibi", "gptj",
                     "whisper-sinusoid"}


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.stem)
def test_an_old_recipe_reads_as_its_kind_and_writes_back_without_its_defaults(tmp_path, path):
    entry = old(path.name)["model"]
    data = entry["hf"]
    kind = RECIPES[data["kind"]]
    recipe = kind.from_json(data)
    written = recipe.to_json()
    defaults = {f.name: f.default for f in dataclasses.fields(kind)}
    assert all(data[k] == v for k, v in written.items())  # nothing written that the old manifest did not say
    assert all(data[k] == defaults[k] for k in data.keys() - written.keys())  # left out: only keys at their defaults
    assert kind.from_json(written) == recipe
    assert recipe_problem({**entry, "folder": str(tmp_path)}) == ""


@pytest.mark.parametrize("model_type", CONFIG_ONLY)
def test_an_old_manifest_loads_beside_the_graph_it_was_written_with_and_judges_it(tmp_path, model_type):
    """The same tiny config builds the same graph (its sha256 is the old manifest's); the old manifest, its folder
    moved to this one, loads beside it (export.load checks it) and the hf runtime runs the model's code from its
    recipe: every comparison passes."""
    folder = zoo.tiny(model_type, tmp_path / model_type)
    olds = {p.name.removeprefix(f"{model_type}-").removesuffix(".json"): old(p.name) for p in OLD
            if old(p.name)["model"]["architecture"] == model_type}
    assert olds
    for b in build_model(read_model(folder), backend=next(iter(olds.values()))["backend"]):
        if b.role.role not in olds:
            continue
        manifest = olds[b.role.role]
        graph, _ = export.save(b.artifact, tmp_path / "built", b.name)
        assert hashlib.sha256(graph.read_bytes()).hexdigest() == manifest["sha256"]
        manifest["model"]["folder"] = str(folder.resolve())
        graph.with_suffix(".json").write_text(json.dumps(manifest))
        art = export.load(graph)
        report = verdicts.run_parity(art, ["ort-cpu", Hf()], seqs=(17,), batches=(2,), properties=False)
        assert report.passed and any(r.runtime == "hf" for r in report.results), b.name


@pytest.mark.parametrize("model_type", TABLES)
def test_an_old_recipe_of_a_trained_table_judges_the_graph_of_its_model(tmp_path, model_type):
    folder = with_weights(model_type, tmp_path / model_type)
    olds = [old(p.name)["model"] for p in OLD if old(p.name)["model"]["architecture"] == model_type]
    built = {b.role.role: b for b in build_model(read_model(folder), backend="portable")}
    for entry in olds:
        hf = Hf({**entry, "folder": str(folder.resolve())})
        report = verdicts.run_parity(built[entry["role"]].artifact, ["ort-cpu", hf], seqs=(17,), batches=(2,),
                                     properties=False)
        assert report.passed and any(r.runtime == "hf" for r in report.results), entry["role"]


@pytest.mark.parametrize("change, why", [
    ({"module": "os"}, "recipe module 'os' is not a transformers model module"),
    ({"rotary": "system"}, "recipe rotary 'system' is not transformers position code"),
    ({"apply": 3}, "recipe apply 3 is not a string"),
    ({"split": "yes"}, "recipe split 'yes' is not true or false"),
    ({"rope_theta": -1.0}, "recipe rope_theta -1.0 is not a positive number"),
    ({"rope_theta": True}, "recipe rope_theta True is not a positive number"),
    ({"hook": "x"}, "recipe field 'hook' is not one of the rope recipe's"),
])
def test_a_recipe_field_that_is_not_what_its_kind_takes_is_refused_in_one_line(change, why):
    data = old("llama-rope.json")["model"]["hf"]
    assert RopeRecipe.from_json(data)
    with pytest.raises(RecipeError) as caught:
        RopeRecipe.from_json({**data, **change})
    assert str(caught.value) == why
    with pytest.raises(RecipeError, match="has no rotary"):
        RopeRecipe.from_json({k: v for k, v in data.items() if k != "rotary"})
