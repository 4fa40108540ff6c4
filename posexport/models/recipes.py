"""What a role tells the hf runtime: how to run the model's own code for it, one small dataclass per kind. A family's
own kinds are defined in its module; the kinds several families' roles share are here. A recipe goes into a graph's
manifest as JSON (its kind and every field not at its default) and is read back from it; a manifest is user input,
so every field is checked for its type, and the names of transformers code for the pattern its kind allows."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

MODULE = re.compile(r"transformers\.models\.[a-z0-9_]+\.modeling_[a-z0-9_]+")
# A composite's sub-config (CLVP's speech_config), dotted where parts nest.
PART = re.compile(r"([a-z0-9_]+_config|encoder|decoder)(\.[a-z0-9_]+_config)*")
# What each field type accepts from JSON (a bool is no number).
ACCEPTS: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "a string"), "bool": ((bool,), "true or false"), "int": ((int,), "an integer"),
    "float | None": ((int, float, type(None)), "a number"),
}


class RecipeError(ValueError):
    """Why a manifest's recipe cannot be run: one line naming the field."""


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """Where the role's code reads its config (a composite's part, a wrapper's text_config, a model's vision tower);
    a kind adds what its session needs. ``names``: field -> the transformers names it may hold."""

    kind: ClassVar[str]
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {}
    # field -> what its value must be, where more than its type says (a window size, a positive number)
    described: ClassVar[Mapping[str, str]] = {}

    part: str = ""
    text_config: bool = False
    vision_config: bool = False

    def to_json(self) -> dict[str, Any]:
        """The kind, its required fields and every other field not at its default."""
        return {"kind": self.kind, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                                      if f.default is dataclasses.MISSING or getattr(self, f.name) != f.default}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Recipe:
        """The recipe a manifest holds, checked field by field (RecipeError naming the first field that is wrong)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields) - {"kind"})
        if unknown:
            raise RecipeError(f"recipe field {unknown[0]!r} is not one of the {cls.kind} recipe's")
        missing = [n for n, f in fields.items() if f.default is dataclasses.MISSING and n not in data]
        if missing:
            raise RecipeError(f"the {cls.kind} recipe has no {missing[0]}")
        for name, value in data.items():
            if name != "kind":
                check_field(name, value, fields[name].type, cls)
        recipe = cls(**{k: v for k, v in data.items() if k != "kind"})
        recipe.check()
        return recipe

    def check(self) -> None:
        """Values the types allow but the session cannot run (a kind overrides it)."""


def check_field(name: str, value: Any, annotation: str, recipe: type[Recipe]) -> None:
    accepted, what = ACCEPTS[annotation]
    if isinstance(value, bool) and bool not in accepted or not isinstance(value, accepted):
        raise RecipeError(f"recipe {name} {value!r} is not {recipe.described.get(name, what)}")
    if name == "module" and not MODULE.fullmatch(value):
        raise RecipeError(f"recipe module {value!r} is not a transformers model module")
    if name == "part" and value and not PART.fullmatch(value):
        raise RecipeError(f"recipe {name} {value!r} is not transformers position code")
    if name in recipe.names and not recipe.names[name].fullmatch(value):
        raise RecipeError(f"recipe {name} {value!r} is not transformers position code")


def window_size(size: int, name: str) -> None:
    """A window size the model's attention class is built with."""
    if size < 0:
        raise RecipeError(f"recipe {name} {size!r} is not a window size")


ROTARY = re.compile(r"[A-Za-z0-9_]+Rotary(Positional)?Embedding")
EMBEDDINGS = re.compile(r"[A-Za-z0-9_]+Embeddings")
APPLY = re.compile(r"apply_rotary_pos_emb(_interleave|_vision)?|apply_rotary_emb")


@dataclass(frozen=True, kw_only=True)
class RopeRecipe(Recipe):
    """The model's rotary embedding class and its apply function, as its attention calls them."""

    kind: ClassVar[str] = "rope"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"rotary": ROTARY, "apply": APPLY}
    described: ClassVar[Mapping[str, str]] = {"rope_theta": "a positive number"}

    module: str
    rotary: str
    apply: str
    layer_type: str = ""  # the rotary's layer type (rope_parameters keyed by layer type)
    rope_theta: float | None = None  # one rotary module per base (Granite-SWA's layer_rope_theta)
    unscaled: bool = False  # Molmo2's layers outside rope_scaling_layers: the rotary built unscaled
    split: bool = False  # its attention hands apply only the leading rotary channels (StableLM)
    bshd_apply: bool = False  # apply takes q as [batch, seq, heads, dim] (Llama-4)
    single_apply: bool = False  # apply rotates one tensor (Gemma-3n, Gemma-4)

    def check(self) -> None:
        if self.rope_theta is not None and not self.rope_theta > 0:
            raise RecipeError(f"recipe rope_theta {self.rope_theta!r} is not a positive number")


T5_ATTENTION = re.compile(r"(UM)?T5Attention|SwitchTransformersAttention|Pop2PianoAttention|Pix2StructTextAttention")


@dataclass(frozen=True, kw_only=True)
class T5Recipe(Recipe):
    """A T5 attention class (or a copy of it) holding the checkpoint's table ``key``; its compute_bias."""

    kind: ClassVar[str] = "t5"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"attention": T5_ATTENTION}

    module: str
    attention: str
    key: str
    decoder: bool


@dataclass(frozen=True, kw_only=True)
class LearnedRecipe(Recipe):
    """A trained table ``key`` looked up at position_ids (+ ``offset``, BART's), or through OPT's module."""

    kind: ClassVar[str] = "learned"

    key: str
    opt: bool = False
    offset: int = 0


@dataclass(frozen=True, kw_only=True)
class WhisperSinusoidRecipe(Recipe):
    """whisper's `sinusoids(length, channels)`: Whisper's encoder table and the fairseq-style tables like it."""

    kind: ClassVar[str] = "whisper-sinusoid"


CREATE = re.compile(r"create_sinusoidal_positions|get_sinusoid_encoding_table|[A-Za-z0-9_]+SinusoidalPositionalEmbedding")


@dataclass(frozen=True, kw_only=True)
class SinusoidTableRecipe(Recipe):
    """The model's own function (or embedding class) that fills its fixed sinusoid table."""

    kind: ClassVar[str] = "sinusoid-table"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"create": CREATE}

    module: str
    create: str
