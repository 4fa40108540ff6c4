"""A synthetic model of any size for the real-size checks (tests/test_surgery_size.py, benchmarks/size.py):
input_ids → Gather from an embedding table [rows, HEADS·DIM] → com.microsoft RotaryEmbedding reading
cos/sin caches of 4096 rows built the usual way (float32 angles), all of it in external data. The data
file is sparse: the table is holes except a seeded block of float32 values every BLOCK_EVERY bytes, so a
copy that drops or shifts bytes is caught, and a 4 GiB model costs no disk; ``dense`` fills it all (what a
real model's weights are: no holes to skip)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh

ROWS, HEADS, DIM = 4096, 2, 16
WIDTH = HEADS * DIM
BLOCK_EVERY = 64 << 20  # bytes between the table's seeded blocks
BLOCK = 64 << 10  # bytes of each seeded block
TABLE = "embed_tokens.weight"


def caches() -> tuple[np.ndarray, np.ndarray]:
    inv_freq = 10000.0 ** (-np.arange(0, DIM, 2, dtype=np.float32) / DIM)
    angles = np.arange(ROWS, dtype=np.float32)[:, None] * inv_freq
    return np.cos(angles), np.sin(angles)


def stored(name: str, dims: list[int], location: str, offset: int, length: int) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, data_type=onnx.TensorProto.FLOAT, dims=dims, data_location=onnx.TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        tensor.external_data.add(key=key, value=value)
    return tensor


def seeded_rows(table_rows: int) -> list[int]:
    """Rows of the table that hold seeded values (the first row of each block): what a test can gather."""
    row_bytes = WIDTH * 4
    return [offset // row_bytes for offset in range(0, table_rows * row_bytes, BLOCK_EVERY)]


def synthetic_model(folder: Path, data_bytes: int, name: str = "model.onnx", dense: bool = False) -> Path:
    """``folder/name`` and its data ``name.data`` with a table of about ``data_bytes`` (made once)."""
    path = folder / name
    if path.is_file():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    location = name + ".data"
    cos, sin = caches()
    rows = max(1, data_bytes // (WIDTH * 4))
    start = 2 * cos.nbytes + (-2 * cos.nbytes % 4096)
    with open(folder / location, "wb") as f:
        f.truncate(start + rows * WIDTH * 4)
        os.pwrite(f.fileno(), cos.tobytes() + sin.tobytes(), 0)
        rng = np.random.default_rng(0)
        block = BLOCK_EVERY if dense else BLOCK
        for offset in range(0, rows * WIDTH * 4, BLOCK_EVERY):
            count = min(block, rows * WIDTH * 4 - offset) // 4
            os.pwrite(f.fileno(), rng.standard_normal(count, dtype=np.float32).tobytes(), start + offset)
    tensors = [stored("cos_cache", list(cos.shape), location, 0, cos.nbytes),
               stored("sin_cache", list(sin.shape), location, cos.nbytes, sin.nbytes),
               stored(TABLE, [rows, WIDTH], location, start, rows * WIDTH * 4)]
    nodes = [oh.make_node("Gather", [TABLE, "input_ids"], ["x"], name="embed"),
             oh.make_node("RotaryEmbedding", ["x", "position_ids", "cos_cache", "sin_cache"], ["y"], domain="com.microsoft",
                          name="rope", interleaved=0, num_heads=HEADS)]
    graph = oh.make_graph(nodes, "synthetic", [oh.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, ["batch", "seq"]),
                                               oh.make_tensor_value_info("position_ids", onnx.TensorProto.INT64, ["batch", "seq"])],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", "seq", WIDTH])], initializer=tensors)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("com.microsoft", 1)], ir_version=10)
    path.write_bytes(model.SerializeToString(deterministic=True))
    return path


def stored_span(path: Path, name: str) -> tuple[Path, int, int]:
    """(data file, offset, length) of the stored tensor ``name`` of the model at ``path``."""
    tensor = next(t for t in onnx.load(str(path), load_external_data=False).graph.initializer if t.name == name)
    entries = {e.key: e.value for e in tensor.external_data}
    return path.parent / entries["location"], int(entries["offset"]), int(entries["length"])


def same_bytes(a: tuple[Path, int, int], b: tuple[Path, int, int], chunk: int = 16 << 20) -> bool:
    """Whether two stored spans hold the same bytes (read a chunk at a time)."""
    if a[2] != b[2]:
        return False
    with open(a[0], "rb") as fa, open(b[0], "rb") as fb:
        fa.seek(a[1])
        fb.seek(b[1])
        return all(fa.read(min(chunk, a[2] - done)) == fb.read(min(chunk, a[2] - done)) for done in range(0, a[2], chunk))


def error_past_limit(model: Path, patched: Path) -> float:
    """onnxruntime's y of the patched model against the float64 rope of the source's seeded table rows, at
    positions up to twice the old limit: max |y − ref| / max(1, max |ref|)."""
    import onnxruntime as ort

    from posexport.rope.encoding import RopeParams, reference

    path, offset, length = stored_span(model, TABLE)
    table = np.memmap(path, dtype=np.float32, mode="r", offset=offset, shape=(length // (WIDTH * 4), WIDTH))
    first, last = seeded_rows(len(table))[0], seeded_rows(len(table))[-1]
    rows = np.minimum([first, first + 1, last, last + 1, first + 2, last + 2], len(table) - 1)[None]
    positions = np.array([0, 1, ROWS - 1, ROWS, ROWS + 7, 2 * ROWS - 1])[None]
    x = np.asarray(table[rows[0]], dtype=np.float32)[None]
    assert np.abs(x).max() > 0.5  # seeded rows, not holes
    (y,) = ort.InferenceSession(str(patched), providers=["CPUExecutionProvider"]).run(None, {"input_ids": rows, "position_ids": positions})
    expected = reference(RopeParams(head_dim=DIM, heads=HEADS), {"x": x.reshape(1, 6, HEADS, DIM), "position_ids": positions})
    return float(np.abs(y.reshape(expected.shape) - expected).max() / max(1.0, np.abs(expected).max()))
