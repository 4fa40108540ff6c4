"""The families' registry, generated for every family (no per-type code): each family module registered by its one
line, its types its own, a catalogue line for each of them, its pending reasons for types it does not read, and
each of its recipe kinds run by one session; the registry's tables are exactly what the families say."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import posexport.models
from posexport.models import catalogue, oracle
from posexport.models.families import BY_TYPE, FAMILIES, NOT_YET, PENDING, READERS
from posexport.models.family import Family
from posexport.models.recipes import Recipe
from posexport.runtimes.base import Session

NAMES = [f.name for f in FAMILIES]


def test_every_family_module_is_registered_by_its_line():
    """A module of posexport.models that exports FAMILY is a family; each is in the registry once, under its name."""
    modules = [m.name for m in pkgutil.iter_modules(posexport.models.__path__)]
    declared = {m for m in modules if isinstance(getattr(importlib.import_module(f"posexport.models.{m}"), "FAMILY", None), Family)}
    assert sorted(NAMES) == sorted(declared) and len(set(NAMES)) == len(NAMES)


def test_the_registry_is_what_the_families_say():
    assert sum(len(f.types) for f in FAMILIES) == len(READERS) == len(BY_TYPE)  # no type read by two families
    assert READERS == {t: f.name for f in FAMILIES for t in f.types}
    assert set(PENDING) <= set(NOT_YET) and not set(NOT_YET) & set(READERS)  # a type is read or pending, not both
    assert catalogue.NOT_YET_TYPES is NOT_YET


@pytest.mark.parametrize("family", FAMILIES, ids=NAMES)
def test_a_family_describes_every_type_it_reads_in_one_line(family):
    assert family.types and len(set(family.types)) == len(family.types)
    for model_type in family.types:
        line = catalogue.encodings_of(model_type)
        assert line and "\n" not in line and catalogue.entry(model_type).status == catalogue.READ, model_type


@pytest.mark.parametrize("family", FAMILIES, ids=NAMES)
def test_a_familys_pending_reasons_name_types_it_does_not_read(family):
    pending = [t for types in family.pending.values() for t in types]
    assert len(set(pending)) == len(pending) and not set(pending) & set(READERS)
    assert all(why and "\n" not in why and catalogue.entry(t).text == why for why, types in family.pending.items() for t in types)


@pytest.mark.parametrize("family", FAMILIES, ids=NAMES)
def test_each_recipe_kind_of_a_family_is_run_by_one_session(family):
    for recipe, judge in family.sessions.items():
        assert issubclass(recipe, Recipe) and issubclass(judge, Session)
        assert oracle.RECIPES[recipe.kind] is recipe and oracle.SESSIONS[recipe.kind] is judge
        assert recipe.__module__ == judge.__module__ == f"posexport.models.{family.name}"  # the family's own


def test_no_recipe_kind_is_two_families_and_every_kind_has_a_session():
    kinds = [r.kind for r in oracle.SHARED] + [r.kind for f in FAMILIES for r in f.sessions]
    assert len(kinds) == len(set(kinds)) == len(oracle.RECIPES) == len(oracle.SESSIONS)
