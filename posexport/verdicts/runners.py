"""Every runner a verdict can name: the graph runtimes (posexport.runtimes) and the runners of the model's own
code (`hf`, posexport.models.oracle), which sit above the model catalogue whose code they run."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .. import runtimes
from ..models.oracle import Hf
from ..runtimes import Runtime

# Runtimes that run the model's own code instead of the graph (parity --from-model, or named with --runtimes).
MODEL_RUNTIMES: dict[str, Runtime] = {rt.name: rt for rt in (Hf(),)}


def get_runtime(name: str, browser: str | os.PathLike[str] | None = None) -> Runtime:
    return runtimes.get_runtime(name, browser, MODEL_RUNTIMES)


def get_runtimes(names: Sequence[str], browser: str | os.PathLike[str] | None = None) -> list[Runtime]:
    return runtimes.get_runtimes(names, browser, MODEL_RUNTIMES)
