"""Extending a learned absolute position table to more positions (`posexport extend`).

Two strategies, for a table of M rows extended to N > M rows:

- ``mean``: rows 0 … M−1 are the original rows, bit for bit; rows M … N−1 all equal the mean of the
  M original rows.
- ``interpolate``: position interpolation (Chen et al. 2023). The whole table is resampled: new row j is
  the linear interpolation of the original table at the fractional position x = j·M/N,

      new[j] = (1 − f)·old[⌊x⌋] + f·old[⌊x⌋ + 1],   f = x − ⌊x⌋,   old[M] := old[M − 1],

  computed with exact integer arithmetic for ⌊x⌋ and f, in float64. So new[0] = old[0] and, when N/M is
  an integer s, new[s·i] = old[i] bit for bit for every i; the rows in between are new. The rows at
  positions 0 … M−1 therefore change: that is the point of position interpolation (position p of the
  longer model reads what the trained table has at p·M/N). What this strategy leaves untouched is the
  source: the original file or graph is never rewritten, the result goes to a new file.

Extending a graph that was already extended resamples the original trained table again (it never
resamples a resampled one), so repeated `interpolate` does not compound its error.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np

from . import checkpoint, export
from .encodings.learned import STRATEGIES, check_rows, extend_table
from .errors import PosexportError
from .files import check_stem, write_output
from .weights import SUFFIXES, chosen_name, load_table, npy_array, refusals


def extend_graph(path: str | Path, rows: int, strategy: str):
    """A learned graph rebuilt with its table extended to ``rows``; same dtype, opset, source and backend."""
    art = export.load(path)
    if art.encoding.name != "learned":
        raise PosexportError(f"{path}: `extend` needs a learned graph; this one is {art.encoding.name}")
    p = art.params
    check_rows(rows, p.extend_to or p.max_positions)
    extended = art.encoding.with_params(p, extend_to=rows, extend_strategy=strategy)
    m = art.manifest
    return export.build(art.encoding, extended, dtype=m["dtype"], opset=int(m["opset"]), source=m["source"], backend=m["backend"])


def extend_weights(path: str | Path, rows: int, strategy: str, key: str | None) -> bytes:
    """The weights file's bytes with the table (``key``) extended to ``rows``, in the same format and
    dtype; every other tensor of a state dict or safetensors file is kept as it is. The file is read again
    through the checks load_table made (posexport.weights)."""
    path = str(path)
    table = load_table(path, key, (None, None))
    check_rows(rows, table.shape[0])
    extended = extend_table(table, rows, strategy)
    file = Path(path)
    with refusals(path):
        if file.suffix.lower() == ".npy":
            buffer = io.BytesIO()
            np.save(buffer, extended.astype(npy_array(file).dtype))
            return buffer.getvalue()
        if file.suffix.lower() == ".safetensors":
            return checkpoint.with_tensor(file, chosen_name(list(checkpoint.safetensors_header(file)), key, path), extended)
        return torch_with(file, key, path, extended)


def torch_with(file: Path, key: str | None, path: str, extended: np.ndarray) -> bytes:
    """A torch file's bytes with its table (``key``, or its one tensor) replaced, in the table's dtype."""
    import torch

    held = checkpoint.torch_object(file)
    buffer = io.BytesIO()
    if isinstance(held, torch.Tensor):
        torch.save(torch.from_numpy(extended).to(held.dtype), buffer)
        return buffer.getvalue()
    state = dict(held)
    name = chosen_name([k for k, v in state.items() if isinstance(v, torch.Tensor)], key, path)
    state[name] = torch.from_numpy(extended).to(state[name].dtype)
    torch.save(state, buffer)
    return buffer.getvalue()


def extend_file(
    source: str | Path,
    rows: int,
    strategy: str,
    *,
    key: str | None = None,
    out: str | Path | None = None,
    name: str | None = None,
) -> list[Path]:
    """`posexport extend`: a learned graph (.onnx with its manifest) or a weights file, extended to ``rows``
    and written as new files (default: beside the source, named STEM-ROWS). Returns the written paths."""
    source = Path(source)
    if strategy not in STRATEGIES:
        raise PosexportError(f"--strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    out_dir = Path(out) if out is not None else source.parent
    stem = check_stem(f"{source.stem}-{rows}" if name is None else name)
    if source.suffix.lower() == ".onnx":
        if key is not None:
            raise PosexportError(f"--key {key}: only for a weights file; a graph's manifest names its own table")
        if (out_dir / f"{stem}.onnx").resolve() == source.resolve():
            raise PosexportError(f"--name {stem}: would overwrite the source {source}; choose another name or --out")
        return list(export.save(extend_graph(source, rows, strategy), out_dir, stem))
    if source.suffix.lower() not in SUFFIXES:
        raise PosexportError(f"{source}: pass a learned graph (.onnx) or a weights file ({', '.join(SUFFIXES)})")
    data = extend_weights(source, rows, strategy, key)
    target = out_dir / f"{stem}{source.suffix}"
    if target.resolve() == source.resolve():
        raise PosexportError(f"--name {stem}: would overwrite the source {source}; choose another name or --out")
    with contextlib.suppress(OSError):  # a folder that cannot be made shows as the write below failing
        out_dir.mkdir(parents=True, exist_ok=True)
    return [write_output(target, data, "--out")]
