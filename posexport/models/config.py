"""A model's config.json as a reader sees it: every key a reader takes is marked, and a position-related
key that no reader took is an error naming the key, its value and the architecture (never a silent
misread).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import checkpoint, guarded
from ..errors import PosexportError

# POSITION_WORDS: key names that speak of positions. A key matching it that the architecture's reader did
# not take, or did not declare harmless, stops the build.
from ..rope.config import POSITION_WORDS, read_json, shown

MISSING = object()


@dataclass(frozen=True)
class Catalogue:
    """What a wrapper or a composite needs of the catalogue to read its parts as their own types: the family reading
    each model type, and why a type is not read (one line)."""

    families: Mapping[str, Any] = field(default_factory=dict)
    why_not: Callable[[str], str] = lambda model_type: f"model_type {model_type!r} is not in posexport's catalogue"


class ModelConfig:
    """config.json of one architecture; ``get`` marks a key as read, ``check_all_read`` finds the rest."""

    def __init__(self, data: dict[str, Any], architecture: str, source: str, folder: Path | None = None,
                 within: str = "", catalogue: Catalogue = Catalogue()):
        self.data, self.architecture, self.source, self.folder = data, architecture, source, folder
        # A composite's part: the module its model holds the part under (`text_model`); its tables are found there only.
        self.within = within
        # A wrapper or a composite reads its parts as their own types, through the catalogue.
        self.catalogue = catalogue
        self.read: set[str] = set()

    def locate(self, keys: tuple[str, ...]) -> tuple[Path, str]:
        """(file, key) of the first of ``keys`` (the names a checkpoint of this type gives a table) in the folder's
        checkpoint; for a composite's part, each name under the part's module, then as given where it already
        starts there (OWL-ViT's text tower names its table `text_model.…` as CLIPModel-like composites do), so
        that no other part's table is ever taken for this one's."""
        if self.within:
            inside = (n for k in keys for n in (f"{self.within}.{k}", k) if n.startswith(f"{self.within}."))
            keys = tuple(dict.fromkeys(inside))
        return checkpoint.locate(self.folder, keys)

    def has(self, key: str) -> bool:
        self.read.add(key)
        return self.data.get(key) is not None

    def get(self, key: str, default: Any = MISSING) -> Any:
        """The value, or ``default`` (transformers' default for this architecture) when absent or null."""
        self.read.add(key)
        value = self.data.get(key)
        if value is None:
            if default is MISSING:
                raise PosexportError(f"{self.source}: the {self.architecture} config needs key {key!r}")
            return default
        return value

    def number(self, key: str, default: Any = MISSING, *, integer: bool = False) -> Any:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or (integer and int(value) != value):
            self.fail(key, value, f"expected {'an integer' if integer else 'a finite number'}")
        return int(value) if integer else value

    def count(self, key: str, default: Any = MISSING) -> int:
        """A positive integer (heads, dimensions)."""
        value = self.number(key, default, integer=True)
        if value < 1:
            self.fail(key, value, "expected a positive integer")
        return value

    def ignore(self, *keys: str) -> None:
        """Keys that match the position words but do not change the encoding (a reader says why)."""
        self.read.update(keys)

    def fail(self, key: str, value: Any, why: str) -> None:
        raise PosexportError(f"{self.source}: {self.architecture} config key {key!r} = {shown(value)}: {why}")

    def check_all_read(self) -> None:
        for key, value in self.data.items():
            if key not in self.read and value is not None and POSITION_WORDS.search(key):
                self.fail(key, value, "posexport does not know what this key does to positions in this architecture; "
                                      "nothing was built (a silent misread is worse than none)")


def load(folder: Path) -> dict[str, Any]:
    if not folder.is_dir():
        raise PosexportError(f"--from-model {folder}: not a folder; pass a model folder holding config.json")
    if not (folder / "config.json").is_file():
        raise PosexportError(f"--from-model {folder}: no config.json in it")
    data = read_json(guarded.inside(folder, "config.json"), "--from-model")
    if not isinstance(data, dict):
        raise PosexportError(f"{folder / 'config.json'}: a model config is a JSON object")
    return data
