"""What a model reader returns: the model's distinct positional encodings, each with the layers that use
it and what its graph's inputs mean in the model's terms."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Role:
    """One distinct encoding of a model.

    role:     its name in the model (``rope``, ``rope-global``, ``t5-encoder`` …); graphs are named by it
    encoding: a posexport encoding (``posexport list``); ``values`` its raw parameters
    layers:   the layers (0-based) whose attention or embedding uses it
    notes:    the contract in the model's terms (where an offset or an extra token changes what
              position_ids means, which slice of the head rotates …)
    hf:       how the `hf` runtime runs the model's own code for this role (plain data, see runtimes/hf.py)
    """

    role: str
    encoding: str
    values: dict[str, Any]
    layers: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    hf: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelPlan:
    architecture: str  # config.json's model_type
    folder: Path
    roles: tuple[Role, ...]

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
            "hf": role.hf,
        }

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.role == name:
                return r
        raise KeyError(name)
