"""What the model tests share: the one error formula, a tiny model of any registry type (its config, or the model
with its weights), and judging a role against the model's own code (the hf runtime's session on random feeds,
against the encoding's float64 reference) or a misread of it (a graph with one value changed, which the model's
code must fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import zoo


def normalised_error(out: np.ndarray, ref: np.ndarray) -> float:
    """The parity error: max|out − ref| / max(1, max|ref|) (docs/numerics.md), in float64."""
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def own_model(config: Any) -> Any:
    """transformers' model of a config: AutoModel's, else (a tower with no AutoModel entry) the class of
    its modeling module (a text or audio tower, a Q-Former) made for this config class."""
    import importlib
    import inspect

    from transformers import AutoModel
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    try:
        return AutoModel.from_config(config)
    except ValueError:
        name = model_type_to_module_name(config.model_type)
        module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
        (cls,) = [c for n, c in vars(module).items() if inspect.isclass(c) and n.endswith(("TextModel", "AudioModel", "QFormerModel"))
                  and getattr(c, "config_class", None) is type(config)]
        return cls(config)


def with_weights(model_type: str, folder: Path, **overrides: Any) -> Path:
    """A tiny model of the type with its random weights (seed 0), saved by transformers in ``folder``."""
    import torch
    from transformers import AutoConfig

    zoo.tiny(model_type, folder, **overrides)
    torch.manual_seed(0)
    own_model(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    return folder
