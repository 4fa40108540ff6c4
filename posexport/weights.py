"""Loading trained tables (--weights FILE [--key NAME]) from .npy, .safetensors or a torch state dict."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from .errors import PosexportError
from .params import check

SUFFIXES = (".npy", ".safetensors", ".pt", ".pth", ".bin")


def load_table(path: str, key: str | None, shape: tuple[int, ...] | None = None, what: str = "table") -> np.ndarray:
    """A float64 array from a weights file; ``shape`` (None entries match anything) is checked.

    .npy holds the array itself; .safetensors and torch state dicts (.pt/.pth/.bin) need ``key``, unless
    they hold exactly one tensor.
    """
    file = Path(path)
    if not file.is_file():
        raise PosexportError(f"--weights {path}: no such file")
    suffix = file.suffix.lower()
    if suffix not in SUFFIXES:
        raise PosexportError(f"--weights {path}: unknown format; use one of {', '.join(SUFFIXES)}")
    try:
        if suffix == ".npy":
            array = np.load(file, allow_pickle=False)
        else:
            tensors = _load_mapping(file, suffix)
            array = _pick(tensors, key, path)
    except PosexportError:
        raise
    except Exception as e:
        raise PosexportError(f"--weights {path}: cannot read it ({type(e).__name__}: {e})") from None
    array = np.asarray(array, dtype=np.float64)
    if shape is not None and (array.ndim != len(shape) or any(w is not None and w != a for w, a in zip(shape, array.shape))):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        raise PosexportError(f"--weights {path}: {what} has shape {list(array.shape)}, expected {want}")
    if not np.all(np.isfinite(array)):
        raise PosexportError(f"--weights {path}: {what} holds NaN or infinite values")
    return array


def _load_mapping(file: Path, suffix: str) -> dict[str, np.ndarray]:
    if suffix == ".safetensors":
        from safetensors.numpy import load_file

        return dict(load_file(str(file)))
    import torch

    obj = torch.load(file, map_location="cpu", weights_only=True)
    if isinstance(obj, torch.Tensor):
        return {"": obj.float().numpy()}
    if not isinstance(obj, dict):
        raise PosexportError(f"--weights {file}: expected a state dict (a mapping of names to tensors)")
    return {k: v.float().numpy() for k, v in obj.items() if isinstance(v, torch.Tensor)}


def _pick(tensors: dict[str, np.ndarray], key: str | None, path: str) -> np.ndarray:
    if key is None:
        if len(tensors) == 1:
            return next(iter(tensors.values()))
        names = ", ".join(sorted(tensors)[:8])
        raise PosexportError(f"--weights {path}: holds {len(tensors)} tensors; choose one with --key ({names})")
    if key not in tensors:
        names = ", ".join(sorted(tensors)[:8])
        raise PosexportError(f"--key {key}: not in {path}; it holds {names}")
    return tensors[key]


def file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pin(path: str, recorded: str | None) -> tuple[str, str]:
    """(absolute path, sha256) of a --weights file, for a params object: absolute so that a manifest finds
    the file from any folder; when a digest was recorded at build time (a manifest being loaded), the file
    must still have it."""
    check(Path(path).is_file(), "weights", path, "no such file")
    digest = file_digest(path)
    check(recorded in (None, digest), "weights", path, f"changed since the build (sha256 {digest}, manifest says {recorded})")
    return str(Path(path).resolve()), digest


def pin_params(p: Any) -> bool:
    """Check a params object's ``weights``/``key``/``weights_sha256`` fields and pin its --weights file in
    place (absolute path and sha256, see :func:`pin`). True when a weights file is given."""
    check(p.key is None or p.weights is not None, "key", p.key, "names a tensor inside --weights; give --weights too")
    if p.weights is None:
        check(p.weights_sha256 is None, "weights_sha256", p.weights_sha256, "only means something with --weights")
        return False
    path, digest = pin(p.weights, p.weights_sha256)
    object.__setattr__(p, "weights", path)
    object.__setattr__(p, "weights_sha256", digest)
    return True
