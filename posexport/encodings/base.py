"""What every encoding provides, so that build, parity and bench can treat them alike.

An encoding is written twice — a torch module and an onnxscript function — around one float64 numpy
reference. The function takes the graph inputs followed by the cached tables (graph initializers), so a
user can lift it out of a built model and call it from their own graph.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .. import limits
from .. import params as params_mod
from ..contract import BuildOptions, Case, Property, Tables, TensorSpec
from ..dtypes import DType
from ..errors import PosexportError

if TYPE_CHECKING:
    import torch


class Encoding(ABC):
    name: ClassVar[str]
    family: ClassVar[str]
    Params: ClassVar[type]
    # float32 rope/sinusoidal bounds grow with log2 of the largest position (docs/numerics.md).
    position_scaled_tolerance: ClassVar[bool] = False

    def params(self, **values: Any) -> Any:
        """Validated parameters from raw values (CLI strings, JSON), unknown names rejected."""
        return params_mod.build(self.Params, values)

    def describe_params(self) -> list[tuple[str, str, str]]:
        return params_mod.describe(self.Params)

    # --- the contract -------------------------------------------------------------------------
    @abstractmethod
    def inputs(self, p: Any) -> list[TensorSpec]: ...

    def outputs(self, p: Any) -> list[TensorSpec]:
        first = self.inputs(p)[0]
        return [TensorSpec("y", first.dims)]

    # --- the maths ----------------------------------------------------------------------------
    @abstractmethod
    def reference(self, p: Any, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """The float64 oracle, written from the maths in docs/encodings.md and nothing else."""

    @abstractmethod
    def torch_module(self, p: Any, opts: BuildOptions) -> torch.nn.Module:
        """An exportable module whose forward takes the inputs in order and returns y."""

    @abstractmethod
    def tables(self, p: Any, opts: BuildOptions) -> Tables:
        """Initializers the onnxscript function takes after the graph inputs."""

    @abstractmethod
    def script_functions(self, p: Any, opts: BuildOptions, op: Any) -> list[Any]:
        """onnxscript functions in the posexport domain; the first is the entry point, the rest the
        functions it calls. ``op`` is the standard opset chosen for the build."""

    # --- parity inputs ------------------------------------------------------------------------
    @abstractmethod
    def feeds(self, p: Any, case: Case, dtype: DType, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random, non-zero inputs for a case."""

    @abstractmethod
    def cases(self, p: Any, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        """The default parity sweep for these parameters; ``seqs``/``batches`` override its lengths and
        batch sizes (``--seqs``, ``--batches``)."""

    def example_axes(self, p: Any) -> dict[str, int] | None:
        """Sizes of the dynamic axes for the torch export's example inputs; None: distinct small sizes."""
        return None

    def derived_axes(self, p: Any, sizes: Mapping[str, int]) -> dict[str, int]:
        """Sizes of output axes that no input has, from the input axes' sizes (vit-learned's tokens)."""
        return {}

    def properties(self, p: Any) -> list[Property]:
        return []

    def largest_position(self, p: Any, feeds: Mapping[str, np.ndarray]) -> int | None:
        """The largest position the feeds ask for (for position-scaled tolerances), if positions apply."""
        return None

    def source_coordinate_extent(self, p: Any) -> int | None:
        """How far the source coordinates reach where a model's own code resamples a trained table at float32
        coordinates (the model-agreement bound grows with it, as with rope angles); None where it does not."""
        return None

    def with_params(self, p: Any, **changes: Any) -> Any:
        return dataclasses.replace(p, **changes)

    def within_limits(self, p: Any, cases: list[Case], seqs: tuple[int, ...] | None, batches: tuple[int, ...] | None) -> list[Case]:
        """``cases``, refused before any is run when one would allocate past the size cap
        (posexport.limits): its inputs and outputs, times the float64 working copies of a parity case."""
        specs = [*self.inputs(p), *self.outputs(p)]
        for case in cases:
            sizes = {**case.axes, **self.derived_axes(p, case.axes)}
            elements = sum(math.prod(sizes.get(d, 1) if isinstance(d, str) else d for d in s.dims) for s in specs)
            tail = limits.over(elements * limits.FLOAT64 * limits.WORKING_COPIES)
            if tail:
                option = (f"--seqs {','.join(map(str, seqs))}" if seqs else
                          f"--batches {','.join(map(str, batches))}" if batches else f"{self.name}'s parity sweep")
                raise PosexportError(f"{option}: case {case.label} would allocate {tail}; "
                                     "use shorter --seqs or smaller --batches")
        return cases



class Assembled(Encoding):
    """An encoding assembled from its module's own pieces: ``oracle`` (the float64 reference function,
    as a staticmethod) and ``Module`` (the torch module class, built from the parameters)."""

    oracle: ClassVar[Callable[[Any, Mapping[str, np.ndarray]], np.ndarray]]
    Module: ClassVar[Callable[[Any], torch.nn.Module]]

    def reference(self, p: Any, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.oracle(p, feeds)

    def torch_module(self, p: Any, opts: BuildOptions) -> torch.nn.Module:
        return self.Module(p)
