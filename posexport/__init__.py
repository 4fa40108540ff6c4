"""posexport: positional encodings as ONNX graphs, checked against a float64 oracle on every runtime.

The public API (docs/api.md), loaded on first use so that `import posexport` stays light: one call per command,
``listing``, ``build``, ``build_model``, ``save``, ``load``, ``extend_learned``, ``parity``, ``benchmark``,
``benchmark_models``, ``doctor``, ``patch``, ``splice``, ``model_parity``, ``env``, and the types their results come in: ``Artifact``,
``Report``, ``CaseResult``, ``NotCompared``, ``TokenAgreement``, ``Generation``, ``FeedCase``, ``Patched``,
``BenchResult``, ``ModelBench`` and ``PosexportError``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it
PUBLIC = {
    **dict.fromkeys(("listing", "build", "build_model", "save", "load", "extend_learned", "parity", "benchmark",
                     "benchmark_models", "doctor", "patch", "splice", "model_parity", "env"), "posexport.api"),
    **dict.fromkeys(("Report", "CaseResult", "NotCompared", "TokenAgreement", "Generation", "FeedCase"), "posexport.verdicts"),
    "Artifact": "posexport.contract",
    "Patched": "posexport.surgery",
    "BenchResult": "posexport.bench.timing",
    "ModelBench": "posexport.bench.models",
    "PosexportError": "posexport.errors",
}
__all__ = ["__version__", *PUBLIC]


def __getattr__(name: str) -> Any:
    if name in PUBLIC:
        return getattr(importlib.import_module(PUBLIC[name]), name)
    raise AttributeError(f"module 'posexport' has no attribute {name!r}")
