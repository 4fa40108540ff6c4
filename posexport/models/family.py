"""What an architecture family's module exports: one ``FAMILY`` saying which config.json model types it reads,
how it reads a folder, what the catalogue says it builds, why its kin are not read yet, and the transformers
sessions that judge its roles. posexport.models.families assembles the catalogue from them: no other table
names a family."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..runtimes.base import Session
from .config import ModelConfig
from .plan import Role
from .recipes import Recipe

# The catalogue's line for another model type (a composite describes its parts by their own types' lines).
Lookup = Callable[[str], str]


@dataclass(frozen=True)
class Family:
    """One architecture family.

    types:     the config.json model_types it reads
    read:      config -> the model's distinct encodings (roles)
    encodings: the catalogue's line of what it builds: one line for every type, a line per type, or a function of
               the type and the catalogue's lookup of other types' lines
    pending:   why its kin are not read yet: reason -> the model types it explains
    sessions:  its own recipe kinds (posexport.models.recipes.Recipe), each with the session (a posexport.runtimes
               Session, built from the graph, the recipe and the model's folder) running the model's code for it
    """

    types: tuple[str, ...]
    read: Callable[[ModelConfig], list[Role]]
    encodings: str | Mapping[str, str] | Callable[[str, Lookup], str]
    pending: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sessions: Mapping[type[Recipe], type[Session]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Its module's name (READERS' value for each of its types)."""
        return self.read.__module__.rpartition(".")[2]

    def describe(self, model_type: str, lookup: Lookup) -> str:
        """What the catalogue says posexport builds for one of its types."""
        if isinstance(self.encodings, str):
            return self.encodings
        if isinstance(self.encodings, Mapping):
            return self.encodings[model_type]
        return self.encodings(model_type, lookup)
