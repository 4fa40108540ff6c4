"""What a model reader returns: the model's distinct positional encodings, each with the layers that use
it and what its graph's inputs mean in the model's terms."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .recipes import Recipe


@dataclass(frozen=True)
class Role:
    """One distinct encoding of a model.

    role:     its name in the model (``rope``, ``rope-global``, ``t5-encoder`` …); graphs are named by it
    encoding: a posexport encoding (``posexport list``); ``values`` its raw parameters
    layers:   the layers (0-based) whose attention or embedding uses it
    notes:    the contract in the model's terms (where an offset or an extra token changes what
              position_ids means, which slice of the head rotates …)
    hf:       how the `hf` runtime runs the model's own code for this role (a recipe, see models/recipes.py)
    """

    role: str
    encoding: str
    values: dict[str, Any]
    layers: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    hf: Recipe | None = None


# Encodings applied inside attention to q/k (a layer has at most one), and those that scale q.
ROTATIONS = ("rope", "mrope")
SCALES = ("query-scale",)
# The layer_types name of gated-delta / linear-attention layers (OLMo-Hybrid, Qwen3-Next): no softmax
# attention, no rope.
LINEAR_ATTENTION = "linear_attention"


def has_attention(layer_type: str) -> bool:
    """Whether a layer_types entry names a layer with attention (Zamba2's `hybrid`: a shared attention block
    before its Mamba layer)."""
    return "attention" in layer_type or layer_type == "hybrid"


def softmax_attention(layer_type: str) -> bool:
    """Whether a layer_types entry names a softmax-attention layer (full, sliding, …): not a conv, Mamba or
    linear-attention layer."""
    return "attention" in layer_type and layer_type != LINEAR_ATTENTION


@dataclass(frozen=True)
class LayerPlan:
    """What one attention layer does with positions: its rope role (None: a NoPE layer) and the roles
    that scale its queries."""

    layer: int
    rope: str | None
    scales: tuple[str, ...] = ()
    attention: bool = True  # False: a layer without attention (a conv or Mamba layer)
    linear: bool = False  # a linear-attention layer (its attention has no rope)

    def describe(self) -> str:
        if self.linear:
            return "linear attention (no rope)"
        if not self.attention:
            return "no attention"
        return " + ".join([self.rope or "NoPE", *self.scales])


@dataclass(frozen=True)
class ModelPlan:
    architecture: str  # config.json's model_type
    folder: Path
    roles: tuple[Role, ...]
    # Attention layers of the model (0: the config does not say); a layer no rope role names is NoPE.
    layer_count: int = 0
    without_attention: tuple[int, ...] = ()
    linear_attention: tuple[int, ...] = ()

    def layer_plan(self) -> list[LayerPlan]:
        """Per layer, which rope (or none) and which query scalings, for models whose roles are per layer
        (an empty list for embeddings-only or bias-only models)."""
        if not self.layer_count or not any(r.encoding in ROTATIONS + SCALES for r in self.roles):
            return []
        out = []
        for i in range(self.layer_count):
            ropes = [r.role for r in self.roles if r.encoding in ROTATIONS and covers(r, i)]
            scales = tuple(r.role for r in self.roles if r.encoding in SCALES and covers(r, i))
            out.append(LayerPlan(i, ropes[0] if ropes else None, scales, i not in self.without_attention,
                                 i in self.linear_attention))
        return out

    def layer_rope(self, layer: int) -> Role | None:
        """The rope role layer ``layer`` rotates q/k with (None: NoPE); its values are the exact rope
        parameters (``posexport.registry.get_encoding(role.encoding).params(**role.values)``)."""
        for r in self.roles:
            if r.encoding in ROTATIONS and covers(r, layer):
                return r
        return None


    @property
    def name(self) -> str:
        return self.folder.resolve().name

    def manifest_entry(self, role: Role) -> dict[str, Any]:
        """The `model` section of a graph's manifest: enough for `posexport parity` to find the model again."""
        return {
            "folder": str(self.folder.resolve()),
            "architecture": self.architecture,
            "role": role.role,
            "layers": list(role.layers),
            "notes": list(role.notes),
            "hf": role.hf.to_json() if role.hf is not None else {},
            "plan": [{"layer": lp.layer, "uses": lp.describe(), "rope": lp.rope, "scales": list(lp.scales)}
                     for lp in self.layer_plan()],
        }

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.role == name:
                return r
        raise KeyError(name)


def covers(role: Role, layer: int) -> bool:
    """Whether the language model's layer ``layer`` uses the role: a role without layer numbers is used by
    every layer; a vision tower's roles (their own layer numbers) and a composite's parts beside its text model by none."""
    if role.hf is not None and (role.hf.vision_config or role.hf.part not in ("", "text_config")):
        return False
    return not role.layers or layer in role.layers
