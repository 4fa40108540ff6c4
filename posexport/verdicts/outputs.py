"""Saved runtime outputs: one run keeps them (--save-outputs), another judges them (--load-outputs), so a
machine with a GPU and one without compare their runtimes on byte-identical inputs."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import guarded
from ..errors import PosexportError
from ..files import write_output
from ..weights import npy_layout

# Appended to a runtime's name when its outputs come from a saved file.
SAVED = " (saved)"


def feeds_digest(feeds: Mapping[str, np.ndarray]) -> str:
    """sha256 of a case's feeds (names, dtypes, shapes and bytes): saved outputs match only these inputs."""
    h = hashlib.sha256()
    for name in sorted(feeds):
        a = np.ascontiguousarray(feeds[name])
        h.update(f"{name}:{a.dtype.name}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def widen(array: np.ndarray) -> np.ndarray:
    """npz cannot hold bfloat16; float32 holds float16 and bfloat16 values exactly."""
    return array.astype(np.float32) if array.dtype.name in ("float16", "bfloat16") else array


def check_members(saved: io.BytesIO, path: str | Path) -> None:
    """Before np.load allocates: an .npz whose members, uncompressed, fit the byte budget, each .npy member
    declaring the bytes it holds (numpy allocates the declared shape before reading it)."""
    members = guarded.check_archive(saved.getvalue(), path)
    with zipfile.ZipFile(saved) as archive:
        for member in members:
            with archive.open(member) as f:
                shape, _, dtype, start = npy_layout(f)
            if start + int(np.prod(shape, dtype=object)) * dtype.itemsize != member.file_size:
                raise ValueError(f"member {member.filename[:80]!r} declares {list(shape)[:8]} of {dtype}, not the "
                                 f"{member.file_size - start} bytes it holds")
    saved.seek(0)


@dataclass
class Outputs:
    """Runtime outputs of a run, keyed (graph, case, runtime), with the digest of each case's feeds."""

    arrays: dict[tuple[str, str, str], np.ndarray] = field(default_factory=dict)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)
    graphs: dict[str, str] = field(default_factory=dict)  # graph label -> sha256 of the graph

    def save(self, path: str | Path) -> Path:
        """One .npz: outputs stored as float32/float64 (lossless for float16/bfloat16) plus a JSON index."""
        index = {
            "digests": {f"{g}|{c}": d for (g, c), d in self.digests.items()},
            "graphs": self.graphs,
            "outputs": [[g, c, r] for g, c, r in self.arrays],
        }
        arrays = {f"out{i}": widen(a) for i, a in enumerate(self.arrays.values())}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, index=np.array(json.dumps(index)), **arrays)
        return write_output(path, buffer.getvalue(), "--save-outputs")

    @classmethod
    def load(cls, path: str | Path) -> Outputs:
        """Outputs another run saved; a file that is not such an .npz (an .npy, a pickle, a damaged index)
        is one error line."""
        if not Path(path).is_file():
            raise PosexportError(f"--load-outputs {path}: no such file")
        try:
            saved = io.BytesIO(guarded.read_bytes(path))  # a regular file in the budget, an input of the command
            check_members(saved, path)
            with np.load(saved, allow_pickle=False) as data:
                index = json.loads(str(data["index"]))
                arrays = {tuple(key): data[f"out{i}"] for i, key in enumerate(index["outputs"])}
            digests = {tuple(k.split("|", 1)): d for k, d in index["digests"].items()}
            return cls(arrays, digests, dict(index["graphs"]))
        except PosexportError as e:
            raise PosexportError(f"--load-outputs {e}") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, zipfile.BadZipFile) as e:
            raise PosexportError(f"--load-outputs {path}: not a file written by --save-outputs ({' '.join(str(e).split())[:200]})") from None

    def check_graph(self, label: str, sha256: str) -> None:
        """Saved outputs of a graph label must come from the same graph bytes."""
        if self.graphs.get(label) not in (None, sha256):
            raise PosexportError(f"--load-outputs: the saved outputs of {label} come from a different graph (sha256 differs)")

    def for_case(self, label: str, case: str, digest: str) -> Iterator[tuple[str, np.ndarray]]:
        """(runtime (saved), output) of every saved output of this case; its inputs must be these."""
        for (g, c, runtime), out in self.arrays.items():
            if (g, c) != (label, case):
                continue
            if self.digests.get((g, c)) != digest:
                raise PosexportError(
                    f"--load-outputs: {runtime}'s saved output for {label} {case} was made from other inputs; "
                    "use the same graph, --seed, --seqs and --batches as the saving run"
                )
            yield runtime + SAVED, out
