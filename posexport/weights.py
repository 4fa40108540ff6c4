"""Loading trained tables (--weights FILE [--key NAME]) from .npy, .safetensors or a torch state dict.

Every read goes through posexport.guarded (docs/trust.md): the file must stay inside its folder once
symlinks are resolved (or in its Hugging Face cache's blobs/), be a regular file within the byte budget,
and declare sizes its bytes hold (an .npy header's shape × dtype, a safetensors header's byte ranges)
before anything is allocated; only the chosen tensor is read. Pickles are never run: an .npy of objects is
refused, and a torch file is unpickled with weights_only=True from bytes already read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import checkpoint, guarded
from .checkpoint import PICKLE_REFUSED
from .dtypes import COMPUTE
from .errors import PosexportError, one_line
from .params import check

SUFFIXES = (".npy", ".safetensors", ".pt", ".pth", ".bin")
# numpy dtype kinds a table may hold: floats, signed and unsigned integers. Complex (its imaginary part
# would be dropped), bool, datetime/timedelta (day counts), strings, structured and object arrays are refused.
NUMERIC_KINDS = "fiu"
NPY_HEADER = 1 << 16  # bytes of an .npy file's magic and header that are read (numpy writes far less)


@contextlib.contextmanager
def refusals(path: str) -> Iterator[None]:
    """A refusal from the readers below, as one line starting with the option and the file as given."""
    try:
        yield
    except PosexportError as e:
        message = str(e)
        raise PosexportError(message if message.startswith("--") else f"--weights {path}: {message.removeprefix(str(Path(path)) + ': ')}") from None


def checked_file(path: str) -> Path:
    """The file contained in its folder, resolved (symlinks followed; the readers below read it through
    checkpoint.read, from a descriptor that must be that very file) and a regular file within the budget."""
    file = Path(path)
    return guarded.regular_file(guarded.inside(file.parent, file.name))


def load_table(path: str, key: str | None, shape: tuple[int, ...] | None = None, what: str = "table") -> np.ndarray:
    """A float64 array from a weights file; ``shape`` (None entries match anything) is checked.

    .npy holds the array itself; .safetensors and torch state dicts (.pt/.pth/.bin) need ``key``, unless
    they hold exactly one tensor.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise PosexportError(f"--weights {path}: unknown format; use one of {', '.join(SUFFIXES)}")
    with refusals(path):
        file = checked_file(path)
        array = numeric(read_array(file, suffix, key, path), path, what)
    if shape is not None and (array.ndim != len(shape) or any(w is not None and w != a for w, a in zip(shape, array.shape))):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        raise PosexportError(f"--weights {path}: {what} has shape {list(array.shape)}, expected {want}")
    if array.size == 0:  # extending it would make rows of NaN means
        raise PosexportError(f"--weights {path}: {what} is empty (shape {list(array.shape)}); give a table with values")
    check_finite(array, path, what)
    return array


def read_array(file: Path, suffix: str, key: str | None, path: str) -> np.ndarray:
    """The array a weights file holds, as stored."""
    if suffix == ".npy":
        return npy_array(file)
    if suffix == ".safetensors":
        names = list(checkpoint.safetensors_header(file))
        return checkpoint.stored_tensor(file, chosen_name(names, key, path))
    return torch_array(file, key, path)


def npy_layout(stream: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """An .npy header (format 1.0 or 2.0) read from ``stream``: shape, Fortran order, dtype and the offset
    its data starts at, nothing allocated; a header numpy would not write is a ValueError."""
    version = np.lib.format.read_magic(stream)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read_header is None:
        raise ValueError(f"format version {version[0]}.{version[1]}, of which posexport reads 1.0 and 2.0")
    shape, fortran, dtype = read_header(stream, max_header_size=NPY_HEADER)
    return shape, fortran, dtype, stream.tell()


def npy_array(file: Path) -> np.ndarray:
    """An .npy file's array: its header parsed from the bytes read, its shape × dtype checked against the
    bytes after it, then only those read."""
    size = guarded.file_size(file)
    try:
        shape, fortran, dtype, start = npy_layout(io.BytesIO(checkpoint.read(file, 0, min(size, NPY_HEADER))))
    except ValueError as e:
        raise PosexportError(f"{file}: not an .npy file posexport reads ({one_line(e, 200)})") from None
    if dtype.hasobject:  # its data is a pickle
        raise PosexportError(f"{file}: refused: {PICKLE_REFUSED}")
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if start + nbytes != size:
        raise PosexportError(f"{file}: its header declares {list(shape)} of {dtype} ({nbytes} bytes), but {size - start} "
                             "bytes follow the header")
    checkpoint.check_widened(str(file), list(shape), str(dtype), dtype.itemsize)
    data = checkpoint.read(file, start, nbytes)
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C") if nbytes else np.zeros(shape, dtype)


def torch_array(file: Path, key: str | None, path: str) -> np.ndarray:
    """A tensor of a torch file (a state dict, or one tensor), unpickled with weights_only=True."""
    import torch

    held = checkpoint.torch_object(file)
    if isinstance(held, torch.Tensor):
        held = {"": held}
    if not isinstance(held, dict):
        raise PosexportError(f"{file}: expected a state dict (a mapping of names to tensors)")
    tensors = {name: value for name, value in held.items() if isinstance(value, torch.Tensor)}
    return tensor_array(tensors[chosen_name(list(tensors), key, path)], file)


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


def tensor_array(tensor: Any, file: Path) -> np.ndarray:
    """A torch tensor as float32 numpy; complex and bool tensors are refused (a cast would drop the
    imaginary part, or make numbers of flags)."""
    if tensor.is_complex() or str(tensor.dtype) == "torch.bool":
        raise PosexportError(f"--weights {file}: holds a {str(tensor.dtype).removeprefix('torch.')} tensor; a table holds real numbers")
    return tensor.detach().float().numpy()  # the tables' float32, as they will be used


def chosen_name(names: list[str], key: str | None, path: str) -> str:
    """The tensor to read: ``key``, or the only one."""
    if key is None:
        if len(names) == 1:
            return names[0]
        listed = ", ".join(sorted(names)[:8])
        raise PosexportError(f"--weights {path}: holds {len(names)} tensors; choose one with --key ({listed})")
    if key not in names:
        listed = ", ".join(sorted(names)[:8])
        raise PosexportError(f"--key {key}: not in {path}; it holds {listed}")
    return key


def file_digest(path: str) -> str:
    """The sha256 of a weights file, read through the same checks as its table."""
    with refusals(path):
        return hashlib.sha256(checkpoint.read(checked_file(path))).hexdigest()


def pin(path: str, recorded: str | None) -> tuple[str, str]:
    """(absolute path, sha256) of a --weights file, for a params object: absolute so that a manifest finds
    the file from any folder, its symlinks kept (a Hugging Face cache's snapshot name carries the format's
    suffix, its blob does not); when a digest was recorded at build time (a manifest being loaded), the file
    must still have it."""
    check(Path(path).exists() or Path(path).is_symlink(), "weights", path, "no such file")
    digest = file_digest(path)
    check(recorded in (None, digest), "weights", path, f"changed since the build (sha256 {digest}, manifest says {recorded})")
    return str(Path(path).absolute()), digest


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
