"""The runtime base: a runtime says whether it can run, loads a built artifact into a session, and a
session runs feeds (once, or many times with its inputs and outputs bound for timing). A runtime that
can also run whole exported models loads one from its path (external data beside it) into a
ModelSession, whose run returns every output by name: graph parity and whole-model parity use the same
runners under the same names.

Running is kept apart from comparing (posexport.verdicts) and from timing (posexport.bench): a session
returns the graph's output and knows nothing of references, tolerances or clocks. A runtime file holds
only what is its own: the defaults below say "available, supports everything, no caveat, no known
limitation, runs once per call"; see docs/runtimes.md for each runtime's traps.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import onnx

from ..contract import DOMAIN

if TYPE_CHECKING:
    from ..contract import Artifact


@dataclass(frozen=True)
class SessionOptions:
    """How a session is set up: ``threads`` intra-op threads (0: the runtime's default); ``profile``
    asks the runtime to record per-op times where it can (Session.profile); ``spinning`` false asks its
    idle worker threads to sleep at once rather than spin (a bench that runs several sessions in turn
    would otherwise time each one against the spinning threads of the one before)."""

    threads: int = 0
    profile: bool = False
    spinning: bool = True


class Bound:
    """A run whose inputs (and, where the runtime can, preallocated outputs) are bound once: call it to
    run again without re-binding; ``outputs()`` reads what the last call wrote."""

    def __init__(self, call: Callable[[], object], outputs: Callable[[], Sequence[np.ndarray]]):
        self.call = call
        self.outputs = outputs

    def __call__(self) -> None:
        self.call()


class Session(ABC):
    @abstractmethod
    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """The graph's first output for these feeds, as a numpy array in the graph's dtype."""

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Bound:
        """The timing capability: a zero-argument call that runs these feeds. By default a plain run;
        runtimes that can bind inputs and outputs once (onnxruntime's I/O binding) override it."""
        last: list[np.ndarray] = []

        def call() -> None:
            last[:] = [self.run(feeds)]

        return Bound(call, lambda: list(last))

    def profile(self) -> list[tuple[str, float]]:
        """Share of node time by op type over the runs so far, largest first (empty: not recorded)."""
        return []


class ModelSession(ABC):
    """A whole exported model, loaded once from its path."""

    @abstractmethod
    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every output of the model for these feeds, by name."""


class Runtime(ABC):
    name: str
    description: str
    # Where its sessions compute: baselines timed on the host (PyTorch eager) are timed in "cpu" groups.
    device: ClassVar[str] = "cpu"
    # False for a runtime that runs the encoding's own module instead of the ONNX graph (torch): it takes
    # no bare graph, and a bench does not time it once per backend (every backend is the same module).
    runs_graphs: ClassVar[bool] = True
    # Property name -> why this runtime is known to break it: known traps are reported, never hidden.
    # A broken property listed here is reported as a known limitation instead of a failure.
    limitations: Mapping[str, str] = {}
    # False for a runner of the model's own code (hf): its cases are judged by the model-agreement
    # bound, and a graph's properties (position limits, invariances) are not its to hold.
    runs_graph_properties: ClassVar[bool] = True
    # False for a runtime that a run without --runtimes leaves out (one that starts a browser).
    runs_by_default: ClassVar[bool] = True

    def available(self) -> tuple[bool, str]:
        """(True, '') when installed and usable here, else (False, why)."""
        return True, ""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        """(True, '') when this runtime can run this graph correctly, else (False, why)."""
        return True, ""

    def caveats(self, artifact: Artifact) -> str:
        """What in this graph this runtime is known to compute differently ('' when nothing): shown next
        to its results so that a failure points at its cause."""
        return ""

    @abstractmethod
    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> Session: ...

    def supports_model(self, path: Path) -> tuple[bool, str]:
        """(True, '') when this runtime can run the whole exported model at ``path``, else (False, why)."""
        return False, f"{self.name} runs posexport's built graphs, not whole exported models"

    def caveats_model(self, path: Path) -> str:
        """What this runtime says beside its results on a whole model ('' when nothing)."""
        return ""

    def load_model(self, path: Path, options: SessionOptions = SessionOptions()) -> ModelSession:
        raise NotImplementedError(self.supports_model(path)[1])


def bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """A bfloat16 array as its uint16 bits, contiguous (the bits of a strided view would be read as if
    contiguous): how onnxruntime and OpenVINO take bfloat16, which numpy lacks."""
    return np.ascontiguousarray(array).view(np.uint16)


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
    return {node.domain for node in all_nodes(model)} | {imp.domain for imp in model.opset_import if imp.domain != DOMAIN}
