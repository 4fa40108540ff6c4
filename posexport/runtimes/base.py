"""The runtime protocol: a runtime says whether it can run, loads a built artifact, and runs feeds.

Running is kept apart from comparing (posexport.parity): a session returns the graph's output and knows
nothing of references or tolerances.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np
import onnx

if TYPE_CHECKING:
    from ..contract import Artifact


class Session(Protocol):
    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """The graph's single output for these feeds, as a numpy array in the graph's dtype."""


class Runtime(Protocol):
    name: str
    description: str
    # Property name -> why this runtime is known to break it (DESIGN 6: report known traps, never hide
    # them). A broken property listed here is reported as a known limitation instead of a failure.
    limitations: Mapping[str, str]

    def available(self) -> tuple[bool, str]:
        """(True, '') when installed and usable here, else (False, why)."""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        """(True, '') when this runtime can run this graph correctly, else (False, why)."""

    def load(self, artifact: Artifact) -> Session: ...

    def caveats(self, artifact: Artifact) -> str:
        """What in this graph this runtime is known to compute differently ('' when nothing): shown next
        to its results so that a failure points at its cause."""


def output_shape(artifact: Artifact, feeds: Mapping[str, np.ndarray]) -> tuple[int, ...]:
    """The output's concrete shape, from the contract's named axes and the feeds' shapes."""
    sizes: dict[str, int] = {}
    for spec in artifact.encoding.inputs(artifact.params):
        for dim, size in zip(spec.dims, feeds[spec.name].shape):
            if isinstance(dim, str):
                sizes[dim] = size
    sizes.update(artifact.encoding.derived_axes(artifact.params, sizes))
    (out,) = artifact.encoding.outputs(artifact.params)
    return tuple(sizes[d] if isinstance(d, str) else d for d in out.dims)


def all_nodes(model: onnx.ModelProto):
    """Every node of the graph and of its model-local functions (subgraphs of control flow excluded:
    posexport graphs have none)."""
    yield from model.graph.node
    for function in model.functions:
        yield from function.node


def domains(model: onnx.ModelProto) -> set[str]:
    return {node.domain for node in all_nodes(model)} | {imp.domain for imp in model.opset_import if imp.domain != "posexport"}
