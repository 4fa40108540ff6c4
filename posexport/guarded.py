"""The one way in for files a stranger wrote (docs/trust.md): models, their external data, model folders,
genai folders, index files, configs.

Every read goes through a check, and every refusal is one PosexportError naming the file and the reason:

- ``inside(root, path)``: symlinks resolved, the file must lie inside ``root``, or, when ``root`` is a
  Hugging Face cache snapshot (``.../snapshots/<rev>/``), be a regular file directly in that cache's
  ``blobs/`` folder, itself a real folder (no symlink) of the cache; any other layout counts as outside;
- ``regular_file(path)``: it exists and is a regular file (no FIFO, device or folder), within the byte
  budget (POSEXPORT_MAX_BYTES, posexport.limits);
- ``read_bytes(path, offset, length, root)``: a bounded read of a regular file, refused when it would pass
  the file's end or the budget; opened once, without blocking (a FIFO swapped in after a check never
  hangs), and read from that descriptor, whose own path (``/proc/self/fd``) must be the checked one: a
  folder swapped for a symlink between the check and the read is refused, not followed;
- ``read_json(path)``: a JSON document of bounded size and nesting;
- ``external_data(model, model_path)``: every external-data location of a model, checked (contained, not
  the model file itself, declared length = dims × itemsize, offset + length within the file) before
  anything is allocated;
- ``load_model(path)``: the model's protobuf alone, through the same checks; ``read_external_data`` then
  fills its tensors from the checked locations.

Every file checked or read is noted as an input of the running command (posexport.files), so that no
report or output of that command can be written over it.
"""

from __future__ import annotations

import io
import json
import math
import os
import stat
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from .errors import PosexportError, one_line
from . import files, limits
from .limits import ENV, human

MAX_JSON_BYTES = 16 << 20  # configs, indexes and genai_config.json are small; a larger one is not a config
# Bytes per element of each fixed-size ONNX dtype; the 4-bit ones pack two elements per byte.
ITEMSIZE: dict[int, float] = {
    onnx.TensorProto.FLOAT: 4, onnx.TensorProto.UINT8: 1, onnx.TensorProto.INT8: 1, onnx.TensorProto.UINT16: 2,
    onnx.TensorProto.INT16: 2, onnx.TensorProto.INT32: 4, onnx.TensorProto.INT64: 8, onnx.TensorProto.BOOL: 1,
    onnx.TensorProto.FLOAT16: 2, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.UINT32: 4, onnx.TensorProto.UINT64: 8,
    onnx.TensorProto.COMPLEX64: 8, onnx.TensorProto.COMPLEX128: 16, onnx.TensorProto.BFLOAT16: 2,
    onnx.TensorProto.FLOAT8E4M3FN: 1, onnx.TensorProto.FLOAT8E4M3FNUZ: 1, onnx.TensorProto.FLOAT8E5M2: 1,
    onnx.TensorProto.FLOAT8E5M2FNUZ: 1, onnx.TensorProto.UINT4: 0.5, onnx.TensorProto.INT4: 0.5,
    **({onnx.TensorProto.FLOAT4E2M1: 0.5} if hasattr(onnx.TensorProto, "FLOAT4E2M1") else {}),
}
EXTERNAL_KEYS = {"location", "offset", "length", "checksum"}


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def cache_blobs(top: Path) -> Path | None:
    """The ``blobs/`` folder of the Hugging Face cache that ``top`` (resolved) is a snapshot in:
    ``<repo>/snapshots/<rev>/...`` shares ``<repo>/blobs/``, when that is a real folder (not a symlink:
    a ``blobs`` pointing elsewhere would make elsewhere count as the cache)."""
    for folder in (top, *top.parents):
        if folder.parent.name == "snapshots":
            blobs = folder.parent.parent / "blobs"
            try:
                return blobs if stat.S_ISDIR(os.lstat(blobs).st_mode) else None
            except OSError:
                return None
    return None


def contained(target: Path, top: Path) -> bool:
    """``target`` (resolved) lies inside ``top`` (resolved), or is a regular file directly in the blobs/
    of the Hugging Face cache ``top`` is a snapshot in (a folder or anything else there is outside)."""
    if within(target, top):
        return True
    blobs = cache_blobs(top)
    return blobs is not None and target.parent == blobs and os.path.isfile(target)


def resolved(path: Path) -> Path:
    if "\x00" in str(path):
        raise PosexportError(f"{str(path)[:200]!r}: holds a NUL byte; posexport reads only plain file names")
    try:
        return path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise PosexportError(f"{path}: cannot resolve it ({e}); posexport reads only plain files and symlinks that resolve") from None


def inside(root: Path | str, path: Path | str) -> Path:
    """``path`` (relative paths are taken from ``root``) resolved, symlinks followed; refused unless it lies
    inside ``root`` or is a blob of the Hugging Face cache ``root`` is a snapshot of (``contained``)."""
    root = Path(root)
    given = Path(path) if Path(path).is_absolute() else root / path
    target = resolved(given)
    if contained(target, resolved(root)):
        return target
    raise PosexportError(
        f"{given}: resolves to {target}, outside {root}; posexport reads only files inside the input's folder "
        "(or a regular file in its Hugging Face cache's own blobs/ folder)"
    )


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: Path, info: os.stat_result, cap: int | None) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise PosexportError(f"{path}: is {kind_of(info.st_mode)}, not a regular file; give a regular file")
    budget(path, info.st_size, cap)


def budget(path: Path | str, nbytes: int, cap: int | None = None, what: str = "reading it") -> None:
    """Refuse ``path`` when ``what`` takes ``nbytes``, past ``cap`` (default: POSEXPORT_MAX_BYTES)."""
    limit = limits.max_bytes() if cap is None else cap
    if nbytes > limit:
        raise PosexportError(f"{path}: {what} takes {human(nbytes)}, over the {human(limit)} limit on what posexport "
                             f"reads (set {ENV} to raise it)")


def regular_file(path: Path | str, max_bytes: int | None = None) -> Path:
    """``path`` exists and is a regular file (symlinks followed) of at most ``max_bytes`` (default: the
    POSEXPORT_MAX_BYTES budget); returns it, noted as an input of the command."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise PosexportError(f"{path}: no such file") from None
    except OSError as e:
        raise PosexportError(f"{path}: cannot read it ({e.strerror or e})") from None
    except ValueError:  # a NUL byte
        raise PosexportError(f"{str(path)[:200]!r}: holds a NUL byte; posexport reads only plain file names") from None
    check_regular(path, info, max_bytes)
    files.note_input(path, info)
    return path


def file_size(path: Path | str) -> int:
    """The size of a regular file (any size: the budget is the reader's to check)."""
    return os.stat(regular_file(path, max_bytes=math.inf)).st_size  # type: ignore[arg-type]


def descriptor_path(fd: int) -> Path | None:
    """The path the open file ``fd`` lies at, from /proc/self/fd (None where there is no /proc)."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def open_checked(path: Path | str, root: Path | str | None = None, exact: bool = False) -> tuple[int, os.stat_result, Path]:
    """A descriptor on a regular file, its fstat and the path opened, opened once without blocking. With
    ``root``, ``path`` is first contained in it (``inside``); with ``root`` or ``exact`` (``path`` is one
    ``inside`` returned), the descriptor itself must be that resolved file: its own path (or, without
    /proc, its device and inode), so a folder swapped for a symlink after the check is refused, never read."""
    target = inside(root, path) if root is not None else Path(path)
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PosexportError(f"{target}: no such file") from None
    except OSError as e:
        raise PosexportError(f"{target}: cannot read it ({e.strerror or e})") from None
    except ValueError:
        raise PosexportError(f"{str(target)[:200]!r}: holds a NUL byte; posexport reads only plain file names") from None
    try:
        info = os.fstat(fd)
        if (root is not None or exact) and not same_file(fd, info, target):
            raise PosexportError(f"{target}: changed while being opened (the file opened is not the one checked); "
                                 "posexport reads only files that stay put")
        check_regular(target, info, math.inf)  # type: ignore[arg-type]
    except BaseException:
        os.close(fd)
        raise
    files.note_input(target, info)
    return fd, info, target


def same_file(fd: int, info: os.stat_result, target: Path) -> bool:
    """The open ``fd`` is the file at ``target`` (resolved when checked): by its /proc path, else by inode."""
    opened = descriptor_path(fd)
    if opened is not None:
        return opened == target
    try:
        now = os.stat(target, follow_symlinks=False)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def read_bytes(path: Path | str, offset: int = 0, length: int | None = None, root: Path | str | None = None,
               max_bytes: int | None = None, exact: bool = False) -> bytes:
    """``length`` bytes (default: to the end) of a regular file from ``offset``; with ``root`` contained in
    it, with ``root`` or ``exact`` checked on the open descriptor (``open_checked``). Refused past the
    file's end or past ``max_bytes`` (default: the budget) before anything is allocated."""
    fd, info, path = open_checked(path, root, exact)
    try:
        size = info.st_size
        length = size - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > size:
            raise PosexportError(f"{path}: bytes {offset}..{offset + length} asked for, past the file's {size} bytes")
        budget(path, length, max_bytes, f"reading {length} bytes of it")
        chunks, done = [], 0
        while done < length:
            chunk = os.pread(fd, min(length - done, 1 << 26), offset + done)
            if not chunk:
                raise PosexportError(f"{path}: ended at {offset + done} bytes while being read; it changed underneath")
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise PosexportError(f"{path}: cannot read it ({e.strerror or e})") from None
    finally:
        os.close(fd)


def check_archive(data: bytes, path: Path | str) -> list[zipfile.ZipInfo]:
    """The members of a zip archive held in ``data`` (a torch checkpoint, an .npz), refused before any is
    inflated when together, uncompressed, they pass the budget: a few MB of deflated zeros may stand for
    gigabytes. Not a zip archive: refused."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as e:
        raise PosexportError(f"{path}: not a zip archive ({one_line(e, 120)})") from None
    budget(path, sum(m.file_size for m in members), what=f"inflating its {len(members)} archive member(s)")
    return members


def read_json(path: Path | str, root: Path | str | None = None, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON document (UTF-8, at most ``max_bytes``, nested no deeper than Python's recursion allows)."""
    data = read_bytes(path, root=root, max_bytes=max_bytes)
    path = Path(root) / path if root is not None else path
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise PosexportError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); give a JSON file") from None
    except ValueError as e:
        raise PosexportError(f"{path}: not valid JSON ({one_line(e)}); give a JSON file") from None
    except RecursionError:
        raise PosexportError(f"{path}: JSON nested too deeply to read; give a plain JSON file") from None


# --- models and their external data ---------------------------------------------------------------


def tensors_of(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a graph holds: initializers, sparse initializers, node attributes, subgraphs."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        yield from attribute_tensors(node.attribute)


def attribute_tensors(attributes: Iterable[onnx.AttributeProto]) -> Iterator[onnx.TensorProto]:
    for attr in attributes:
        yield from [attr.t, *attr.tensors]
        for sparse in [attr.sparse_tensor, *attr.sparse_tensors]:
            yield from (sparse.values, sparse.indices)
        for sub in [attr.g, *attr.graphs]:
            yield from tensors_of(sub)


def model_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of a model: its graph's, its functions' (nodes and attribute defaults), training graphs'."""
    yield from tensors_of(model.graph)
    for function in model.functions:
        yield from attribute_tensors(function.attribute_proto)
        for node in function.node:
            yield from attribute_tensors(node.attribute)
    for info in model.training_info:
        yield from tensors_of(info.initialization)
        yield from tensors_of(info.algorithm)


def is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data) > 0


@dataclass(frozen=True)
class ExternalTensor:
    """One tensor's checked external data: ``length`` bytes of ``path`` (resolved) from ``offset``; read
    again as ``location`` inside ``root`` (``open``), so that the file read is the one contained."""

    name: str
    path: Path
    offset: int
    length: int
    dtype: int  # onnx.TensorProto data type
    dims: tuple[int, ...]
    location: str  # as the model names it, relative to the model's folder
    tensor: onnx.TensorProto = field(repr=False, compare=False, hash=False)
    root: Path = Path()  # the model's folder, as given

    def open(self) -> int:
        """A descriptor on the data file, contained and checked on the descriptor (``open_checked``)."""
        return open_checked(self.location, self.root)[0]

    def read(self, max_bytes: int | None = None) -> bytes:
        return read_bytes(self.location, self.offset, self.length, root=self.root, max_bytes=max_bytes)


def nonnegative(model_path: Path, name: str, key: str, raw: str) -> int:
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 20):
        raise PosexportError(f"{model_path}: tensor {name!r}: external data {key} {raw[:40]!r} is not a byte count")
    return int(raw)


def expected_length(model_path: Path, tensor: onnx.TensorProto) -> int:
    """dims × itemsize of a tensor, refused for a dtype of no fixed size or a negative dimension."""
    name = tensor.name[:80]
    if tensor.data_type not in ITEMSIZE:
        shown = onnx.TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in onnx.TensorProto.DataType.values() else tensor.data_type
        raise PosexportError(f"{model_path}: tensor {name!r} in external data has dtype {shown}, of no fixed size; "
                             "posexport reads only numeric tensors from external data")
    if any(d < 0 for d in tensor.dims):
        raise PosexportError(f"{model_path}: tensor {name!r} has a negative dimension {list(tensor.dims)}")
    return math.ceil(math.prod(tensor.dims) * ITEMSIZE[tensor.data_type])


def external_entry(tensor: onnx.TensorProto, model_path: Path, root: Path, sizes: dict[Path, int]) -> ExternalTensor:
    name = tensor.name[:80]
    entries = {e.key: e.value for e in tensor.external_data}
    if tensor.data_location != onnx.TensorProto.EXTERNAL or "location" not in entries or set(entries) - EXTERNAL_KEYS:
        raise PosexportError(f"{model_path}: tensor {name!r} has malformed external data {sorted(entries)}; "
                             "expected data_location EXTERNAL with location, offset, length")
    location = entries["location"]
    if not location or Path(location).is_absolute():
        raise PosexportError(f"{model_path}: tensor {name!r}: external data location {location[:80]!r} must be a "
                             "file name relative to the model's folder")
    path = inside(root, location)
    if path == model_path.resolve():
        raise PosexportError(f"{model_path}: tensor {name!r}: external data location {location[:80]!r} is the model "
                             "file itself")
    if path not in sizes:
        sizes[path] = file_size(path)
    offset = nonnegative(model_path, name, "offset", entries.get("offset", "0"))
    expected = expected_length(model_path, tensor)
    length = nonnegative(model_path, name, "length", entries["length"]) if "length" in entries else expected
    if length != expected:
        raise PosexportError(f"{model_path}: tensor {name!r}: external data length {length} is not its {expected} "
                             f"bytes (dims {list(tensor.dims)})")
    if offset + length > sizes[path]:
        raise PosexportError(f"{model_path}: tensor {name!r}: external data bytes {offset}..{offset + length} are past "
                             f"the end of {location[:80]!r} ({sizes[path]} bytes)")
    return ExternalTensor(tensor.name, path, offset, length, tensor.data_type, tuple(tensor.dims), location, tensor, root)


def external_data(model: onnx.ModelProto, model_path: Path | str) -> list[ExternalTensor]:
    """Every tensor ``model`` (loaded without its external data) keeps in external data, checked against
    the files on disk before anything is allocated; locations are taken from the model's folder as given
    (not resolved, so a Hugging Face cache snapshot finds its blobs)."""
    model_path = Path(model_path).absolute()
    sizes: dict[Path, int] = {}
    return [external_entry(t, model_path, model_path.parent, sizes) for t in model_tensors(model) if is_external(t)]


def load_model(path: Path | str, max_bytes: int | None = None) -> onnx.ModelProto:
    """The model's protobuf (external data not read), from a regular file within the budget."""
    data = read_bytes(regular_file(path, max_bytes), max_bytes=max_bytes)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise PosexportError(f"{path}: cannot read it as an ONNX model ({one_line(e) or 'not a protobuf'})") from None
    return model


def read_external_data(model: onnx.ModelProto, model_path: Path | str, max_bytes: int | None = None) -> list[ExternalTensor]:
    """Read each checked external tensor into the model (as raw data, the location dropped), once the
    model file and all its data together fit the budget; returns what was read."""
    found = external_data(model, model_path)
    total = file_size(model_path) + sum(t.length for t in found)
    budget(model_path, total, max_bytes, "the model with its external data")
    for entry in found:
        entry.tensor.raw_data = entry.read(max_bytes)
        del entry.tensor.external_data[:]
        entry.tensor.data_location = onnx.TensorProto.DEFAULT
    return found
