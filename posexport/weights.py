"""Loading trained tables (--weights FILE [--key NAME]) from .npy, .safetensors or a torch state dict."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any

import numpy as np

from .dtypes import COMPUTE
from .errors import PosexportError
from .params import check

SUFFIXES = (".npy", ".safetensors", ".pt", ".pth", ".bin")
# numpy dtype kinds a table may hold: floats, signed and unsigned integers. Complex (its imaginary part
# would be dropped), bool, datetime/timedelta (day counts), strings, structured and object arrays are refused.
NUMERIC_KINDS = "fiu"
PICKLE_REFUSED = ("it is a pickle that needs code to load it, which posexport never runs; "
                  "save a plain state dict of tensors, or use .safetensors or .npy")


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
    array = numeric(read_array(file, suffix, key, path), path, what)
    if shape is not None and (array.ndim != len(shape) or any(w is not None and w != a for w, a in zip(shape, array.shape))):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        raise PosexportError(f"--weights {path}: {what} has shape {list(array.shape)}, expected {want}")
    check_finite(array, path, what)
    return array


def read_array(file: Path, suffix: str, key: str | None, path: str) -> np.ndarray:
    """The array a weights file holds, as stored; any failure to read it is one error line."""
    try:
        if suffix == ".npy":
            return np.load(file, allow_pickle=False)
        return _pick(_load_mapping(file, suffix), key, path)
    except PosexportError:
        raise
    except pickle.UnpicklingError:
        raise PosexportError(f"--weights {path}: refused: {PICKLE_REFUSED}") from None
    except ValueError as e:
        if "allow_pickle" in str(e):  # an object array: a pickle inside a .npy
            raise PosexportError(f"--weights {path}: refused: {PICKLE_REFUSED}") from None
        raise PosexportError(f"--weights {path}: cannot read it ({type(e).__name__}: {e})") from None
    except Exception as e:
        raise PosexportError(f"--weights {path}: cannot read it ({type(e).__name__}: {e})") from None


def numeric(array: np.ndarray, path: str, what: str) -> np.ndarray:
    """The array as float64, refused unless it holds real numbers (see NUMERIC_KINDS)."""
    array = np.asarray(array)
    if array.dtype.kind not in NUMERIC_KINDS or array.dtype.fields is not None:
        raise PosexportError(f"--weights {path}: {what} has dtype {array.dtype}; a table holds real numbers (float or integer)")
    return array.astype(np.float64)


def check_finite(array: np.ndarray, path: str, what: str) -> None:
    """Every value must be finite, and stay finite once cast to the tables' dtype (float32): a float64
    file holding 1e300 would otherwise build a graph full of inf."""
    if not np.all(np.isfinite(array)):
        raise PosexportError(f"--weights {path}: {what} holds NaN or infinite values")
    with np.errstate(over="ignore"):
        cast = array.astype(COMPUTE.numpy)
    if not np.all(np.isfinite(cast)):
        largest = float(np.max(np.abs(array)))
        raise PosexportError(f"--weights {path}: {what} holds {largest:.3g}, which overflows the tables' "
                             f"{COMPUTE.name} (largest {float(np.finfo(COMPUTE.numpy).max):.3g})")


def _load_mapping(file: Path, suffix: str) -> dict[str, np.ndarray]:
    if suffix == ".safetensors":
        from safetensors.numpy import load_file

        return dict(load_file(str(file)))
    import torch

    obj = torch.load(file, map_location="cpu", weights_only=True)
    if isinstance(obj, torch.Tensor):
        return {"": tensor_array(obj, file)}
    if not isinstance(obj, dict):
        raise PosexportError(f"--weights {file}: expected a state dict (a mapping of names to tensors)")
    return {k: tensor_array(v, file) for k, v in obj.items() if isinstance(v, torch.Tensor)}


def tensor_array(tensor: Any, file: Path) -> np.ndarray:
    """A torch tensor as float32 numpy; complex and bool tensors are refused (a cast would drop the
    imaginary part, or make numbers of flags)."""
    if tensor.is_complex() or str(tensor.dtype) == "torch.bool":
        raise PosexportError(f"--weights {file}: holds a {str(tensor.dtype).removeprefix('torch.')} tensor; a table holds real numbers")
    return tensor.detach().float().numpy()  # the tables' float32, as they will be used


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
