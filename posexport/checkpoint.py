"""Tensors of a model folder, as transformers saves them: model.safetensors, sharded safetensors with
model.safetensors.index.json, or pytorch_model.bin (read with torch.load(weights_only=True)) and its index.

Only the named tensor is read: a bias table never loads a whole checkpoint. Every file is reached through
posexport.guarded (inside the folder, or its Hugging Face cache's blobs/; a regular file in the byte
budget), and a safetensors header is checked against the file (known dtypes, sizes = shape × itemsize,
offsets in the file and not overlapping) before any tensor is read.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from . import guarded, limits
from .dtypes import numpy_dtype
from .errors import PosexportError, one_line
from .limits import FLOAT64

SINGLE = ("model.safetensors", "pytorch_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
# safetensors dtypes posexport reads, as numpy dtypes (BF16 widened to float32 by hand).
SAFETENSORS = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
               "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER = 100 << 20  # safetensors' own limit
PICKLE_REFUSED = ("it is a pickle that needs code to load it, which posexport never runs; where you trust its "
                  "source, save its tensors plainly: safetensors.torch.save_file(tensors, 'weights.safetensors'), "
                  "or numpy.save for one table")


def present(folder: Path, name: str) -> bool:
    return (folder / name).exists() or (folder / name).is_symlink()


def weight_files(folder: Path) -> list[Path]:
    """The folder's checkpoint files (safetensors first), or an error saying what was looked for."""
    files = [checked(folder, name) for name in SINGLE if present(folder, name)]
    for index in INDEXES:
        if present(folder, index):
            files += sorted({checked(folder, shard) for shard in read_index(folder, index).values()})
    if not files:
        raise PosexportError(f"{folder}: no weights ({', '.join(SINGLE + INDEXES)}); this model's encoding has trained tables")
    return files


def has_weights(folder: Path) -> bool:
    """Whether the folder holds a checkpoint at all (a config-only folder does not)."""
    return any(present(folder, name) for name in SINGLE + INDEXES)


def checked(folder: Path, name: str) -> Path:
    """``name`` in ``folder``: contained, a regular file within the budget; resolved, as ``read`` takes it."""
    return guarded.regular_file(guarded.inside(folder, name))


def read(path: Path, offset: int = 0, length: int | None = None) -> bytes:
    """Bytes of a file ``checked`` (or guarded.inside) resolved: the descriptor read is that very file."""
    return guarded.read_bytes(path, offset, length, exact=True)


def read_index(folder: Path, name: str) -> dict[str, str]:
    path = folder / name
    index = guarded.read_json(name, root=folder)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not (isinstance(weight_map, dict) and all(isinstance(v, str) and v for v in weight_map.values())):
        raise PosexportError(f"{path}: not a checkpoint index (expected weight_map, an object of tensor names to file names)")
    return weight_map


def safetensors_header(path: Path) -> dict[str, dict[str, Any]]:
    """The tensors of a safetensors file (name -> dtype, shape, absolute byte range), checked."""
    size = guarded.file_size(path)
    (length,) = struct.unpack("<Q", read(path, 0, 8)) if size >= 8 else (None,)
    if length is None or length > min(size - 8, MAX_HEADER):
        raise PosexportError(f"{path}: not a safetensors file (its header length is past the file)")
    try:
        header = json.loads(read(path, 8, length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise PosexportError(f"{path}: not a safetensors file (header: {one_line(e, 120)})") from None
    if not isinstance(header, dict):
        raise PosexportError(f"{path}: not a safetensors file (its header is not an object)")
    header.pop("__metadata__", None)
    tensors, start = {}, 8 + length
    for name, entry in header.items():
        tensors[name] = header_entry(path, name, entry, start, size)
    spans = sorted(t["span"] for t in tensors.values())
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
        raise PosexportError(f"{path}: not a safetensors file posexport reads (tensors' byte ranges overlap)")
    return tensors


def header_entry(path: Path, name: str, entry: Any, start: int, size: int) -> dict[str, Any]:
    fields = entry if isinstance(entry, dict) else {}
    dtype, shape, offsets = fields.get("dtype"), fields.get("shape"), fields.get("data_offsets")
    if dtype not in SAFETENSORS:
        raise PosexportError(f"{path}: tensor {name[:80]!r} has dtype {json.dumps(dtype)[:40]}; posexport reads "
                             f"{', '.join(SAFETENSORS)}")
    integers = isinstance(shape, list) and isinstance(offsets, list) and len(offsets) == 2 and all(
        type(v) is int and v >= 0 for v in (*shape, *offsets))
    if not integers:
        raise PosexportError(f"{path}: tensor {name[:80]!r}: shape and data_offsets must be non-negative integers")
    first, last = offsets
    nbytes = math.prod(shape) * np.dtype(SAFETENSORS[dtype]).itemsize
    if last - first != nbytes or start + last > size:
        raise PosexportError(f"{path}: tensor {name[:80]!r}: bytes {first}..{last} do not hold its shape {shape} "
                             f"of {dtype}, or lie past the file's end")
    return {"dtype": dtype, "shape": shape, "span": (start + first, start + last)}


def file_keys(path: Path) -> list[str]:
    if path.suffix == ".safetensors":
        return list(safetensors_header(path))
    return list(torch_state(path))


def torch_object(path: Path) -> Any:
    """What a torch checkpoint holds, unpickled with torch.load(weights_only=True) from bytes read through
    posexport.guarded (a regular file within the budget): tensors and plain containers, no code. The
    archive is checked first (``check_torch_archive``), so nothing it would allocate passes the budget."""
    data = read(path)
    import torch

    check_torch_archive(path, data)
    return loaded(path, lambda: torch.load(io.BytesIO(data), map_location="cpu", weights_only=True))


def loaded(path: Path, load: Any) -> Any:
    """``load()`` of a torch archive, its refusals one line."""
    try:
        return load()
    except pickle.UnpicklingError:
        raise PosexportError(f"{path}: refused: {PICKLE_REFUSED}") from None
    except Exception as e:  # a damaged archive: torch's errors have no common base
        raise PosexportError(f"{path}: cannot read it as a torch checkpoint ({one_line(e, 200)})") from None


def check_torch_archive(path: Path, data: bytes) -> None:
    """Before torch.load allocates anything: a zip archive as torch.save writes (a bare pickle is refused),
    whose members together, uncompressed, fit the budget (a deflated bomb is refused before it inflates),
    and whose every tensor, loaded without its data on the meta device, is dense and fits the budget once
    widened to float64 (a zero stride makes a terabyte view of one stored number)."""
    import torch
    from torch.serialization import skip_data

    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise PosexportError(f"{path}: refused: not an archive torch.save writes (a zip); {PICKLE_REFUSED}")
    guarded.check_archive(data, path)

    def meta() -> Any:
        with skip_data():
            return torch.load(io.BytesIO(data), map_location="meta", weights_only=True)

    for name, tensor in tensors_in(loaded(path, meta)):
        check_tensor(path, name, tensor)


def tensors_in(held: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """Every tensor in a checkpoint's containers (dicts, lists, tuples, sets), with its key path."""
    import torch

    if isinstance(held, torch.Tensor):
        return [(prefix or "(the tensor)", held)]
    if depth > 32:
        raise PosexportError(f"checkpoint containers nested past 32 levels at {prefix[:80]!r}")
    items = held.items() if isinstance(held, dict) else enumerate(held) if isinstance(held, (list, tuple, set)) else ()
    return [found for key, value in items for found in tensors_in(value, f"{prefix}.{key}" if prefix else str(key), depth + 1)]


def check_tensor(path: Path, name: str, tensor: Any) -> None:
    """A tensor of a checkpoint loaded on the meta device (torch itself refuses a view past its storage):
    dense, and within the budget once widened to float64."""
    import torch

    if tensor.layout != torch.strided:
        raise PosexportError(f"{path}: tensor {name[:80]!r} is {str(tensor.layout).removeprefix('torch.')}, not a dense "
                             "tensor; save tensor.to_dense() instead")
    check_widened(f"{path}: tensor {name[:80]!r}", list(tensor.shape), str(tensor.dtype).removeprefix("torch."), tensor.element_size())


def check_widened(subject: str, shape: list[int], dtype: str, itemsize: int) -> None:
    """Refuse a stored tensor whose values, read in their dtype and widened to float64 (posexport's
    tables are computed in float64), would pass the budget: named with its shape, dtype and the budget."""
    limits.check_allocation(subject, f"its {dtype} values {shape}, read and widened to float64,",
                            math.prod(shape) * (itemsize + FLOAT64))


def torch_state(path: Path) -> dict:
    state = torch_object(path)
    if not isinstance(state, dict):
        raise PosexportError(f"{path}: expected a state dict (names to tensors)")
    return state


def locate(folder: Path, keys: tuple[str, ...]) -> tuple[Path, str]:
    """(file, key) of the first of ``keys`` found in the folder's checkpoint (names differ by prefix:
    `transformer.wpe.weight` in a GPT2LMHeadModel, `wpe.weight` in a GPT2Model)."""
    for index in INDEXES:
        if present(folder, index):
            mapping = read_index(folder, index)
            for key in keys:
                if key in mapping:
                    return checked(folder, mapping[key]), key
    for path in weight_files(folder):
        found = set(file_keys(path))
        for key in keys:
            if key in found:
                return path, key
    raise PosexportError(f"{folder}: the checkpoint holds none of {', '.join(keys)}")


def stored_tensor(path: Path, key: str) -> np.ndarray:
    """One tensor of a safetensors file in its stored dtype (BF16 widened to float32), read by its checked
    byte range."""
    entry = safetensors_header(path).get(key)
    if entry is None:
        raise PosexportError(f"{path}: holds no tensor {key!r}")
    check_widened(f"{path}: tensor {key[:80]!r}", entry["shape"], entry["dtype"], np.dtype(SAFETENSORS[entry["dtype"]]).itemsize)
    first, last = entry["span"]
    raw = np.frombuffer(read(path, first, last - first), dtype=np.dtype(SAFETENSORS[entry["dtype"]]).newbyteorder("<"))
    if entry["dtype"] == "BF16":  # the top half of a float32
        raw = (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.reshape(entry["shape"])


def with_tensor(path: Path, name: str, array: np.ndarray) -> bytes:
    """The safetensors file's bytes with tensor ``name`` replaced by ``array`` in its stored dtype; every other
    tensor's bytes are copied as stored, by their checked ranges (the file's metadata is not kept)."""
    tensors = safetensors_header(path)
    stored = tensors[name]["dtype"]
    new = np.ascontiguousarray(array.astype(numpy_dtype("bfloat16") if stored == "BF16" else SAFETENSORS[stored]))
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for key, entry in sorted(tensors.items(), key=lambda item: item[1]["span"]):
        first, last = entry["span"]
        data = new.tobytes() if key == name else read(path, first, last - first)
        header[key] = {"dtype": entry["dtype"], "shape": list(new.shape) if key == name else entry["shape"],
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def read_tensor(path: Path, key: str) -> np.ndarray:
    """One tensor as float64."""
    if path.suffix != ".safetensors":
        state = torch_state(path)
        if key not in state:
            raise PosexportError(f"{path}: holds no tensor {key!r}")
        return state[key].double().numpy()
    return stored_tensor(path, key).astype(np.float64)
