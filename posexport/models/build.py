"""Build every distinct encoding of a model folder: one graph per role, its manifest carrying a `model`
section (folder, architecture, role, layers, contract notes) that `posexport parity` uses to run the
model's own code beside the graph."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import export
from ..contract import DEFAULT_OPSET, DEFAULT_TARGET, Artifact
from ..errors import PosexportError
from . import read_model
from .plan import ModelPlan, Role


# Encodings applied inside attention: a role without layer numbers is used by every layer.
ATTENTION = ("rope", "mrope", "t5", "alibi", "swin")


@dataclass
class Built:
    role: Role
    artifact: Artifact
    name: str  # file stem: <folder>-<role>


def chosen_roles(plan: ModelPlan, encoding: str | None) -> list[Role]:
    """Every role, or those of ``encoding`` when the user named one; naming another is an error."""
    if encoding is None:
        return list(plan.roles)
    roles = [r for r in plan.roles if r.encoding == encoding]
    if not roles:
        uses = ", ".join(sorted({r.encoding for r in plan.roles}))
        raise PosexportError(f"--encoding {encoding}: the {plan.architecture} model in {plan.folder} uses {uses}, "
                             "not that; leave --encoding out with --from-model")
    return roles


def build_model(
    plan: ModelPlan | str | Path,
    encoding: str | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    dtype: str = "float32",
    opset: int = DEFAULT_OPSET,
    source: str = "script",
    backend: str = "auto",
    target: str = DEFAULT_TARGET,
    name: str | None = None,
) -> list[Built]:
    """One graph per role (or per role of ``encoding``); ``overrides`` (build options such as
    position_limit) replace what the model says. ``name`` replaces the folder's name in the file stems."""
    plan = plan if isinstance(plan, ModelPlan) else read_model(plan)
    out = []
    for role in chosen_roles(plan, encoding):
        art = export.build(role.encoding, {**role.values, **(overrides or {})}, dtype=dtype, opset=opset,
                           source=source, backend=backend, target=target)
        art.manifest["model"] = plan.manifest_entry(role)
        out.append(Built(role, art, f"{name or plan.name}-{role.role}"))
    return out


def save_model(built: list[Built], out_dir: str | Path) -> list[tuple[Path, Path]]:
    return [export.save(b.artifact, out_dir, b.name) for b in built]


def describe(built: Built) -> str:
    """One line: which layers use this graph."""
    layers = built.role.layers
    if layers:
        span = f"layers {compress(layers)}"
    else:
        span = "every layer" if built.role.encoding in ATTENTION else "the input embeddings"
    return f"{built.name}: {built.role.encoding} ({built.role.role}) used by {span}"


def compress(ids: tuple[int, ...]) -> str:
    """(0, 1, 2, 5, 6) -> '0-2, 5-6'."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
