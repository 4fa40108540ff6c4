"""Writing files the way every command does: atomically, with the permissions a plain open() would give,
and any OS failure turned into one user error.

Files that belong together (a graph NAME.onnx and its manifest NAME.json) are written as a set: every
temporary (``.NAME.onnx.XXXXXXXX.tmp`` beside its target) is written before any is renamed into place,
under an exclusive lock on the name (``.NAME.posexport.lock``, removed afterwards), so two writers of one
name never pair one's graph with the other's manifest. A writer interrupted (an exception, Ctrl-C, or
SIGTERM, which the CLI turns into an exception) removes its temporaries; temporaries a killed writer left
behind are removed by the next write of that name into that folder.

No file a command writes may be one it reads: within ``inputs_guarded()`` (the CLI runs every command in
it) every file posexport.guarded opens or checks, and every file an input names (a model's external data,
a genai folder's files), is noted by device and inode, and a write over any of them (a report, saved
outputs, a plot, a model) is refused with one line before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from .errors import PosexportError

LOCK_SUFFIX = ".posexport.lock"
# tempfile.mkstemp's names: the prefix, 8 characters of its alphabet, the suffix.
TEMPORARY = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")
MAX_STEM = 200
SEPARATORS = {"/", "\\", os.sep, os.altsep or "/"}
# A file's content: bytes, or a function that writes it through an open file descriptor (a large file
# streamed from its sources instead of held in memory).
Content = bytes | Callable[[int], None]
# The files the running command reads, (device, inode) -> the path it reads them as; None outside a command.
_inputs: dict[tuple[int, int], str] | None = None


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_stem(name: str, option: str = "--name") -> str:
    """A file name stem: no folder part, nothing a path could climb out of ``--out`` with."""
    plain = (
        isinstance(name, str) and name not in ("", ".", "..") and len(name) <= MAX_STEM
        and not any(sep in name for sep in SEPARATORS) and name.isprintable()
    )
    if not plain:
        raise PosexportError(
            f"{option} {name!r}: expected a plain file name stem (no folder, no path separator, not . or .., "
            f"printable, at most {MAX_STEM} characters); choose the folder with --out"
        )
    return name


@contextlib.contextmanager
def inputs_guarded() -> Iterator[None]:
    """Within: every file noted as read (``note_input``) is refused as a destination (``check_not_input``)."""
    global _inputs
    saved, _inputs = _inputs, {}
    try:
        yield
    finally:
        _inputs = saved


@contextlib.contextmanager
def reading_destinations() -> Iterator[None]:
    """Within: files read are not noted as inputs: a writer reading what it would replace (patch checks that
    a file at its destination is its own previous output) does not make it one."""
    global _inputs
    saved, _inputs = _inputs, None
    try:
        yield
    finally:
        _inputs = saved


def note_input(path: str | Path, info: os.stat_result | None = None) -> None:
    """Note ``path`` (its stat ``info`` when the caller has it) as a file the command reads; a path that
    cannot be stat'ed is no file to protect."""
    if _inputs is None:
        return
    try:
        info = info or os.stat(path)
    except (OSError, ValueError):
        return
    _inputs.setdefault((info.st_dev, info.st_ino), str(path))


def check_not_input(path: str | Path, option: str) -> None:
    """Refuse ``path`` as a destination when it is (symlinks followed, hard links too) a file the command reads."""
    try:
        info = os.stat(path) if _inputs else None
    except (OSError, ValueError):
        return
    read_as = _inputs.get((info.st_dev, info.st_ino)) if info is not None else None
    if read_as is not None:
        shown = "" if read_as == str(path) else f" ({read_as})"
        raise PosexportError(f"{option} {path}: is a file this command reads{shown}; choose another path "
                             "(posexport never writes over its inputs)")


def check_destination(path: str | Path, option: str, folders: bool = False) -> Path:
    """Before a long run: ``path`` can be written (its folder exists and is writable, it is no folder).
    With ``folders`` (an ``--out``), missing folders are fine where they can be made: ``write_files``
    makes them."""
    target = Path(path)
    folder = target.parent
    while folders and not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise PosexportError(f"{option} {target}: {folder} {why}; choose a path in an existing folder")
    if target.is_dir():
        raise PosexportError(f"{option} {target}: a folder; {option} names the file to write, e.g. {target / 'FILE'}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PosexportError(f"{option} {target}: cannot write there; choose a writable path")
    check_not_input(target, option)
    return target


@contextlib.contextmanager
def name_lock(folder: Path, stem: str) -> Iterator[None]:
    """An exclusive lock on ``stem`` in ``folder``, held by one writer at a time (waiting for the others)."""
    path = folder / f".{stem}{LOCK_SUFFIX}"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        fd = os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            current = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:  # the previous holder removed the lock file while this one waited
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
            break
        os.close(fd)  # locked a lock file that was removed meanwhile: lock the new one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # while still locked: a waiter sees its file removed and locks a fresh one
        os.close(fd)


def remove_stale_temporaries(folder: Path, targets: set[str]) -> None:
    """Remove the temporaries of ``targets`` (file names in ``folder``) a killed writer left behind. Called
    under the name's lock, so no live writer is using them; only posexport's own temporary names match."""
    with os.scandir(folder) as entries:
        for entry in entries:
            match = TEMPORARY.fullmatch(entry.name)
            if match and match["target"] in targets and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)


def write_temporary(path: Path, data: Content) -> str:
    """``data`` in a new temporary file beside ``path``, with plain-open() permissions; its name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f.fileno())
            else:
                f.write(data)
        # mkstemp creates 0600; give the file the permissions a plain open() would have.
        os.chmod(tmp, 0o666 & ~current_umask())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def atomic_write(files: Mapping[Path, Content]) -> None:
    """Write every file's temporary, then rename them all: a failure before the renames (a full disk, a
    folder where a file should go) leaves every target as it was and no temporary behind."""
    temporaries: dict[Path, str] = {}
    try:
        for path, data in files.items():
            temporaries[path] = write_temporary(path, data)
        for path in temporaries:  # the one rename failure to expect: a folder in the way
            if path.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        for path in list(temporaries):
            os.replace(temporaries[path], path)
            del temporaries[path]
    except BaseException:
        for tmp in temporaries.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise


def write_files(files: Mapping[str | Path, Content | str], option: str, stem: str | None = None) -> list[Path]:
    """Write files of one folder as a set (see the module's docstring), under the lock of ``stem`` (default:
    the first file's stem); an OS failure is one error line naming ``option``."""
    targets = {Path(path): data.encode() if isinstance(data, str) else data for path, data in files.items()}
    for path in targets:
        check_not_input(path, option)
    first = next(iter(targets))
    folder = first.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)  # an --out in folders yet to make (check_destination)
        with name_lock(folder, stem or first.stem):
            remove_stale_temporaries(folder, {path.name for path in targets})
            atomic_write(targets)
    except OSError as e:
        raise PosexportError(f"{option} {first}: cannot write there ({e.strerror}); choose a writable path") from None
    return list(targets)


def write_output(path: str | Path, data: bytes | str, option: str) -> Path:
    """Atomically write a file the user asked for with ``option``; an OS failure is one error line."""
    return write_files({path: data}, option)[0]


def check_out_folder(out: str | Path, option: str = "--out") -> Path:
    """An output folder, not a file: ``--out graphs/rope.onnx`` means ``--out graphs --name rope``."""
    folder = Path(out)
    if folder.suffix.lower() in (".onnx", ".json") or folder.is_file():
        raise PosexportError(f"{option} {folder}: {option} is the folder the graph and its manifest go in, not a file; "
                             f"to name the file, give {option} {folder.parent} --name {folder.stem}")
    return folder


def write_outputs(outputs: Sequence[tuple[str | Path, bytes | str, str]]) -> list[Path]:
    """Files each asked for by its own option (a command's reports: ``(path, content, option)``), each
    written atomically once all are known to be allowed: none is an input, none named twice."""
    seen: dict[tuple[int, int] | Path, str] = {}
    for path, _, option in outputs:
        check_not_input(path, option)
        try:
            info = os.stat(path)
            key: tuple[int, int] | Path = (info.st_dev, info.st_ino)
        except (OSError, ValueError):
            key = Path(os.path.abspath(path))
        if key in seen:
            raise PosexportError(f"{option} {path}: {seen[key]} writes that file too; give each report its own path")
        seen[key] = option
    return [write_output(path, data, option) for path, data, option in outputs]
