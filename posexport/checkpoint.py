"""Tensors of a model folder, as transformers saves them: model.safetensors, sharded safetensors with
model.safetensors.index.json, or pytorch_model.bin (read with torch.load(weights_only=True)) and its index.

Only the named tensor is read: a bias table never loads a whole checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .errors import PosexportError

SINGLE = ("model.safetensors", "pytorch_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def weight_files(folder: Path) -> list[Path]:
    """The folder's checkpoint files (safetensors first), or an error saying what was looked for."""
    files = [folder / name for name in SINGLE if (folder / name).is_file()]
    for index in INDEXES:
        if (folder / index).is_file():
            files += sorted({folder / shard for shard in read_index(folder / index).values()})
    if not files:
        raise PosexportError(f"{folder}: no weights ({', '.join(SINGLE + INDEXES)}); this model's encoding has trained tables")
    return files


def has_weights(folder: Path) -> bool:
    """Whether the folder holds a checkpoint at all (a config-only folder does not)."""
    return any((folder / name).is_file() for name in SINGLE + INDEXES)


def read_index(path: Path) -> dict[str, str]:
    try:
        return dict(json.loads(path.read_text())["weight_map"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PosexportError(f"{path}: not a checkpoint index ({e})") from None


def file_keys(path: Path) -> list[str]:
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            return list(f.keys())
    return list(torch_state(path))


def torch_state(path: Path) -> dict:
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise PosexportError(f"{path}: expected a state dict (names to tensors)")
    return state


def locate(folder: Path, keys: tuple[str, ...]) -> tuple[Path, str]:
    """(file, key) of the first of ``keys`` found in the folder's checkpoint (names differ by prefix:
    `transformer.wpe.weight` in a GPT2LMHeadModel, `wpe.weight` in a GPT2Model)."""
    for index in INDEXES:
        if (folder / index).is_file():
            mapping = read_index(folder / index)
            for key in keys:
                if key in mapping:
                    return folder / mapping[key], key
    for path in weight_files(folder):
        present = set(file_keys(path))
        for key in keys:
            if key in present:
                return path, key
    raise PosexportError(f"{folder}: the checkpoint holds none of {', '.join(keys)}")


def read_tensor(path: Path, key: str) -> np.ndarray:
    """One tensor as float64."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            return f.get_tensor(key).double().numpy()
    return torch_state(path)[key].double().numpy()
