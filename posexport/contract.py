"""The graph contract and the types every layer shares: what a built graph takes and returns, how a
parity case and a property are described, and what a build produces.

This module is the bottom layer: it imports neither torch, onnx nor onnxscript, so anything may import
it (runtimes, reports, the CLI) without pulling in the builders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

    from .dtypes import DType

# The version of every JSON report posexport writes (`--json`; a schema per report in docs/schemas/): bumped
# when a key is renamed, removed or changes meaning, never for an added key.
SCHEMA_VERSION = 1

# Every function posexport writes lives in this operator domain, at this version.
DOMAIN = "posexport"
DOMAIN_VERSION = 1

# Opsets a build may target: 17 is the oldest with every op the portable graphs use.
MIN_OPSET = 17
DEFAULT_OPSET = 18

# How a graph is authored: the encoding's onnxscript function, or torch.onnx (dynamo) of its module.
SOURCES = ("script", "torch")

# How a rope graph expresses its rotation (posexport.rope.backends); `auto` picks for --target.
AUTO, PORTABLE, ONNX23, ORT = "auto", "portable", "onnx23", "ort"
BACKENDS = (AUTO, PORTABLE, ONNX23, ORT)
TARGETS = ("onnxruntime", "standard")
DEFAULT_TARGET = "onnxruntime"

# The runtimes whole-model parity runs a model on unless told (posexport model-parity --runtimes).
DEFAULT_MODEL_RUNTIMES = ("ort-cpu", "ort-cpu-noopt")
# Seconds one load, run or timed call of a whole model may take in a child process (--timeout).
DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: str dims are named dynamic axes, ints are fixed."""

    name: str
    dims: tuple[int | str, ...]
    is_float: bool = True  # True: the build's I/O dtype; False: int64


@dataclass(frozen=True)
class BuildOptions:
    dtype: DType
    opset: int
    backend: str = PORTABLE


@dataclass(frozen=True)
class Case:
    """One input configuration: sizes of the dynamic axes and the position the sequence starts at."""

    label: str
    axes: Mapping[str, int]
    start: int = 0
    # Random per-row offsets in [0, start] instead of one shared start (rope/sinusoidal).
    ragged: bool = False


@dataclass(frozen=True)
class PropertyResult:
    ok: bool
    detail: str
    # The measured violation (0 when the property holds exactly), normalised like the parity error.
    error: float = 0.0


# A runner evaluates the graph (or module) under test on feeds and returns its single output.
Runner = Callable[[dict[str, np.ndarray]], np.ndarray]


@dataclass(frozen=True)
class Property:
    """A mathematical property checked on runtime outputs of a built graph, never on Python code."""

    name: str
    description: str
    check: Callable[[Runner, Any, DType, np.random.Generator], PropertyResult]


@dataclass(frozen=True)
class Tables:
    """Cached tables handed to the onnxscript function after the graph inputs, in this order."""

    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Artifact:
    """A built graph and its manifest (encoding, parameters, options, signature, versions, sha256)."""

    model: onnx.ModelProto
    manifest: dict[str, Any]
    # The Encoding (posexport.encodings.base) that built it; encodings build on this module, so it is
    # not named here.
    encoding: Any
    params: Any
    options: BuildOptions

    @property
    def model_bytes(self) -> bytes:
        return self.model.SerializeToString(deterministic=True)

    @property
    def default_name(self) -> str:
        """The file stem a build is saved under when none is given."""
        return self.encoding.name
