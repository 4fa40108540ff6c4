"""A model's external data, never held whole: one stored tensor read by offset and length, and a new data
file written from parts that are either bytes in memory or stored tensors' spans carried from the source
files in bounded, in-kernel copies (tensors located and checked by posexport.guarded)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.numpy_helper as onh

from ..errors import PosexportError
from ..guarded import ExternalTensor
from ..progress import progress

# Bytes moved per copy call (and the buffer when the kernel cannot copy): bounded memory, and few
# enough calls (a thousand for 16 GB) that they cost nothing next to the bytes.
CHUNK = 16 << 20
# Filesystems without copy_file_range between these two files (or none at all): copy through a buffer.
NO_KERNEL_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


def read_tensor(stored: ExternalTensor) -> np.ndarray:
    """One stored tensor's value (only its own bytes are read)."""
    tensor = onnx.TensorProto(name=stored.name, data_type=stored.dtype, dims=stored.dims)
    tensor.raw_data = stored.read()
    return onh.to_array(tensor)


def write_all(fd: int, data: bytes | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def open_regular(stored: ExternalTensor) -> int:
    """A descriptor on ``stored``'s file, contained, still a regular file and checked on the descriptor
    (posexport.guarded: a FIFO or a symlink elsewhere swapped in after the check is refused)."""
    fd = stored.open()
    if stored.offset + stored.length > os.fstat(fd).st_size:
        os.close(fd)
        raise PosexportError(f"{stored.path}: is shorter than when the model was read; it changed underneath")
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # read ahead as cp does: the copy reads it front to back
    return fd


def data_runs(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The runs of ``[start, end)`` holding data; a sparse file's holes (zeros, never written) are left
    out, so they stay holes in the copy. Where the filesystem cannot tell, the whole range."""
    runs, pos = [], start
    try:
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:  # nothing but a hole up to the file's end
                    break
                raise
            if data >= end:
                break
            pos = min(os.lseek(fd, data, os.SEEK_HOLE), end)
            runs.append((data, pos))
    except OSError as e:
        if e.errno not in NO_KERNEL_COPY:
            raise
        return [(start, end)]
    return runs


def copy_run(source: int, fd: int, start: int, end: int, to: int, kernel: bool) -> bool:
    """Bytes ``[start, end)`` of ``source`` into ``fd`` from ``to``, in CHUNK steps: copy_file_range (in
    the kernel, a clone where the filesystem shares blocks), else through a buffer; whether the kernel
    copy still works."""
    while start < end:
        count = min(CHUNK, end - start)
        if kernel:
            try:
                moved = os.copy_file_range(source, fd, count, start, to)
            except OSError as e:
                if e.errno not in NO_KERNEL_COPY:
                    raise
                kernel = False
                continue
        else:
            chunk = os.pread(source, count, start)
            write_all(fd, chunk, to)
            moved = len(chunk)
        if moved == 0:
            raise PosexportError(f"ended at byte {start}; the file changed while it was copied")
        start, to = start + moved, to + moved
    return kernel


def copy_span(stored: ExternalTensor, fd: int, offset: int, advance: Callable[[int], None], kernel: bool = True) -> bool:
    """``stored``'s bytes into ``fd`` (a new file, zeros where nothing is written) at ``offset``, never
    the whole tensor in memory; whether the kernel copy still works (the next span skips it if not)."""
    source = open_regular(stored)
    try:
        start, end = stored.offset, stored.offset + stored.length
        done = start
        for run_start, run_end in data_runs(source, start, end):
            try:
                kernel = copy_run(source, fd, run_start, run_end, offset + run_start - start, kernel and hasattr(os, "copy_file_range"))
            except PosexportError as e:
                raise PosexportError(f"{stored.path}: {e}") from None
            advance(run_end - done)
            done = run_end
        advance(end - done)
    finally:
        os.close(source)
    return kernel


@dataclass
class DataFile:
    """An external data file to write: each part's bytes (in memory, or a stored tensor's span carried
    from its source file) at its offset; zeros between parts. Called with the descriptor of a new, empty file."""

    name: str
    parts: list[tuple[int, bytes | ExternalTensor]]
    size: int

    def __call__(self, fd: int) -> None:
        # fd is a new, empty file (posexport.files); truncating it to 0 anyway would make ext4 flush its
        # pages when it is closed (its replace-by-truncate heuristic), so the call would wait for the disk.
        with progress(f"writing {self.name}", self.size) as advance:
            kernel = True
            for offset, content in self.parts:
                if isinstance(content, ExternalTensor):
                    kernel = copy_span(content, fd, offset, advance, kernel)
                else:
                    write_all(fd, content, offset)
                    advance(len(content))
        os.ftruncate(fd, self.size)  # the padding after the last part, if any
