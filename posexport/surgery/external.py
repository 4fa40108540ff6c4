"""A model's external data, never held whole: one stored tensor read by offset and length, and a new data
file written from parts that are either bytes in memory or stored tensors' spans carried from the source
files in bounded, in-kernel copies (tensors located and checked by posexport.guarded)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.numpy_helper as onh

from ..errors import PosexportError
from ..guarded import ExternalTensor, read_bytes
from ..progress import progress

# Bytes moved per copy call (and the buffer when the kernel cannot copy): bounded memory, and few
# enough calls (a thousand for 16 GB) that they cost nothing next to the bytes.
CHUNK = 16 << 20
# Filesystems without copy_file_range between these two files (or none at all): copy through a buffer.
NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


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


def open_regular(stored: ExternalTensor) -> int:
    """A descriptor on ``stored``'s file, opened without blocking and refused unless still a regular file
    (a FIFO swapped in after the check never hangs the copy)."""
    fd = os.open(stored.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PosexportError(f"{stored.path}: is no longer a regular file; it changed while the model was read")
    return fd


def copy_span(stored: ExternalTensor, fd: int, offset: int, advance: Callable[[int], None]) -> None:
    """``stored``'s bytes into ``fd`` at ``offset``: copy_file_range (in the kernel, a clone where the
    filesystem shares blocks), else through a CHUNK-sized buffer; never the whole tensor in memory."""
    kernel = hasattr(os, "copy_file_range")
    source = open_regular(stored)
    try:
        done = 0
        while done < stored.length:
            count = min(CHUNK, stored.length - done)
            if kernel:
                try:
                    moved = os.copy_file_range(source, fd, count, stored.offset + done, offset + done)
                except OSError as e:
                    if e.errno not in NO_KERNEL_COPY:
                        raise
                    kernel = False
                    continue
            else:
                chunk = os.pread(source, count, stored.offset + done)
                write_all(fd, chunk, offset + done)
                moved = len(chunk)
            if moved == 0:
                raise PosexportError(f"{stored.path}: ended before byte {stored.offset + stored.length}; the file changed while it was copied")
            done += moved
            advance(moved)
    finally:
        os.close(source)


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
