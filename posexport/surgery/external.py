"""A model's external data, never held whole: where each stored tensor's bytes are (checked against the
files' real sizes), one tensor read by offset and length, and a new data file written from parts that are
either bytes in memory or spans carried from the source files in bounded, in-kernel copies."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh

from ..errors import PosexportError
from ..progress import progress

# Bytes moved per copy call: bounded, and large enough that a 16 GB file takes a few hundred calls.
CHUNK = 64 << 20
# Filesystems without copy_file_range between these two files (or none at all): copy through a buffer.
NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


@dataclass(frozen=True)
class ExternalTensor:
    """One tensor kept in external data: its file (resolved, inside the model's folder), span and type."""

    name: str
    path: Path
    offset: int
    length: int
    dtype: int
    dims: tuple[int, ...]


def all_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a graph and its subgraphs (initializers, then node attributes), in graph order."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                yield a.t
            yield from a.tensors
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else []) + list(a.graphs):
                yield from all_tensors(sub)


def inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (links resolved) lies in the folder ``root``."""
    return path.resolve().is_relative_to(root.resolve())


def locate(tensor: onnx.TensorProto, root: Path, model_path: Path) -> ExternalTensor:
    """Where ``tensor``'s bytes are, refusing a location outside the model's folder or past its file's end."""
    entries = {e.key: e.value for e in tensor.external_data}
    location = entries.get("location", "")
    where = f"{model_path}: tensor {tensor.name!r} keeps its data in {location!r}"
    path = root / location
    if not location or Path(location).is_absolute() or not inside(root, path):
        raise PosexportError(f"{where}, which is not a file in the model's folder; the model is not safe to read")
    if not path.is_file():
        raise PosexportError(f"{where}, which does not exist; keep the data file beside the model")
    size = path.stat().st_size
    try:
        offset = int(entries.get("offset", 0))
        length = int(entries["length"]) if "length" in entries else size - offset
    except ValueError:
        raise PosexportError(f"{where} at offset {entries.get('offset')!r}, length {entries.get('length')!r}: not numbers") from None
    if offset < 0 or length < 0 or offset + length > size:
        raise PosexportError(f"{where} at bytes {offset}…{offset + length} but the file has {size}; the data file is truncated or not this model's")
    return ExternalTensor(tensor.name, path.resolve(), offset, length, tensor.data_type, tuple(tensor.dims))


def external_data(model: onnx.ModelProto, model_path: str | Path) -> list[ExternalTensor]:
    """Every tensor of ``model`` (loaded without its external data) kept in external data, located and checked."""
    model_path = Path(model_path)
    return [locate(t, model_path.parent, model_path) for t in all_tensors(model.graph)
            if t.data_location == onnx.TensorProto.EXTERNAL]


def read_bytes(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb") as f:
        data = os.pread(f.fileno(), length, offset) if length else b""
    if len(data) != length:
        raise PosexportError(f"{path}: {length} bytes expected at offset {offset}, found {len(data)}; the file changed while it was read")
    return data


def read_tensor(stored: ExternalTensor) -> np.ndarray:
    """One stored tensor's value (only its own bytes are read)."""
    tensor = onnx.TensorProto(name=stored.name, data_type=stored.dtype, dims=stored.dims)
    tensor.raw_data = read_bytes(stored.path, stored.offset, stored.length)
    return onh.to_array(tensor)


def write_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def copy_span(stored: ExternalTensor, fd: int, offset: int, advance: Callable[[int], None]) -> None:
    """``stored``'s bytes into ``fd`` at ``offset``: copy_file_range (in the kernel, a clone where the
    filesystem shares blocks), else through a CHUNK-sized buffer; never the whole tensor in memory."""
    kernel = hasattr(os, "copy_file_range")
    with open(stored.path, "rb") as source:
        done = 0
        while done < stored.length:
            count = min(CHUNK, stored.length - done)
            if kernel:
                try:
                    moved = os.copy_file_range(source.fileno(), fd, count, stored.offset + done, offset + done)
                except OSError as e:
                    if e.errno not in NO_KERNEL_COPY:
                        raise
                    kernel = False
                    continue
            else:
                chunk = os.pread(source.fileno(), count, stored.offset + done)
                write_all(fd, chunk, offset + done)
                moved = len(chunk)
            if moved == 0:
                raise PosexportError(f"{stored.path}: ended before byte {stored.offset + stored.length}; the file changed while it was copied")
            done += moved
            advance(moved)


@dataclass
class DataFile:
    """An external data file to write: each part's bytes (in memory, or a stored tensor's span carried
    from its source file) at its offset; zeros between parts. Called with an open file descriptor."""

    name: str
    parts: list[tuple[int, bytes | ExternalTensor]]
    size: int

    def __call__(self, fd: int) -> None:
        os.ftruncate(fd, 0)
        with progress(f"writing {self.name}", self.size) as advance:
            for offset, content in self.parts:
                if isinstance(content, ExternalTensor):
                    copy_span(content, fd, offset, advance)
                else:
                    write_all(fd, content, offset)
                    advance(len(content))
        os.ftruncate(fd, self.size)  # the padding after the last part, if any
