"""The op cases of ``python -m matrix.web``: the contrib and standard ops that posexport's graphs and patched
models hand positions to, each in a minimal graph with a float64 reference written here from the formulas
(rope: posexport.rope.encoding.reference; attention: softmax(q·kᵀ/√d + bias)·v), or with the error it must
raise (a position past the cache). A wrong result becomes a repro under docs/web-repros/."""

from __future__ import annotations

import io
import math
import re
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from posexport import indexshare
from posexport.comparison import compare
from posexport.encodings.alibi import AlibiParams, reference as alibi_reference
from posexport.reports.markdown import md_table
from posexport.rope.encoding import RopeParams, reference as rope_reference
from posexport.runtimes import get_runtime

MSFT = "com.microsoft"
FLOAT, FLOAT16, INT32, INT64 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64
BOUNDS = {"float32": 1e-5, "float16": 4e-3}  # attention sums: float32 a little above 1e-6 per element
Reference = Callable[[Mapping[str, np.ndarray]], "dict[str, np.ndarray] | None"]  # None: the run must raise


@dataclass
class OpCase:
    """A minimal graph, its feeds by label, and each label's float64 outputs (None: it must raise)."""

    model: onnx.ModelProto
    feeds: dict[str, dict[str, np.ndarray]]
    reference: Reference
    dtype: str = "float32"
    repro: str = ""  # the file name a wrong result is saved under
    expect: str = ""  # what the README says the right answer is
    found: dict[str, dict[str, str]] = field(default_factory=dict)  # runtime -> failing label -> what it gave


def graph(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
          initializers: Sequence[onnx.TensorProto] = (), opset: int = 18) -> onnx.ModelProto:
    imports = [oh.make_opsetid("", opset), oh.make_opsetid(MSFT, 1)]
    return oh.make_model(oh.make_graph(nodes, "case", inputs, outputs, list(initializers)), opset_imports=imports, ir_version=10)


def tensor(name: str, elem: int, dims: Sequence[int | str]) -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info(name, elem, list(dims))


def cos_sin_cache(rows: int, d: int, base: float, dtype: np.dtype) -> tuple[onnx.TensorProto, onnx.TensorProto]:
    """[rows, d/2] cos and sin of p·θ_i, formed in float64, rounded once."""
    angles = np.arange(rows, dtype=np.float64)[:, None] * base ** (-np.arange(0, d, 2) / d)
    return onh.from_array(np.cos(angles).astype(dtype), "cos_cache"), onh.from_array(np.sin(angles).astype(dtype), "sin_cache")


# --- GroupQueryAttention as onnxruntime-genai wires it: a full cache, positions from the past length ------


def gqa_model(heads: int, kv: int, d: int, rows: int, interleaved: bool, elem: int, dtype: np.dtype,
              positions: bool = False) -> onnx.ModelProto:
    """One GroupQueryAttention node, do_rotary=1, reading a [rows, d/2] cos/sin cache; with ``positions`` it
    also takes position_ids [b, s] (else token t sits at past + t)."""
    names = indexshare.layer_inputs(0)
    inputs = [tensor(names[0], elem, ["b", "s", heads * d]), tensor(names[1], elem, ["b", "s", kv * d]),
              tensor(names[2], elem, ["b", "s", kv * d]), tensor(names[3], elem, ["b", kv, "p", d]),
              tensor(names[4], elem, ["b", kv, "p", d]), tensor("seqlens_k", INT32, ["b"]), tensor("total_sequence_length", INT32, [])]
    inputs += [tensor("position_ids", INT64, ["b", "s"])] if positions else []
    outs = indexshare.layer_outputs(0)
    outputs = [tensor(outs[0], elem, ["b", "s", heads * d]), tensor(outs[1], elem, ["b", kv, "t", d]), tensor(outs[2], elem, ["b", kv, "t", d])]
    node = oh.make_node("GroupQueryAttention", [*names, "seqlens_k", "total_sequence_length", "cos_cache", "sin_cache",
                                                *(["position_ids"] if positions else [])], outs,
                        domain=MSFT, num_heads=heads, kv_num_heads=kv, do_rotary=1, rotary_interleaved=int(interleaved))
    return graph([node], inputs, outputs, cos_sin_cache(rows, d, 10000.0, dtype))


def gqa_feeds(heads: int, kv: int, d: int, batch: int, seq: int, past: int, dtype: np.dtype, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    names = indexshare.layer_inputs(0)
    shapes = [(batch, seq, heads * d), (batch, seq, kv * d), (batch, seq, kv * d), (batch, kv, past, d), (batch, kv, past, d)]
    feeds = {n: rng.standard_normal(shape).astype(dtype) for n, shape in zip(names, shapes)}
    total = past + seq
    return feeds | {"seqlens_k": np.full(batch, total - 1, np.int32), "total_sequence_length": np.array(total, np.int32)}


def gqa_reference(heads: int, kv: int, d: int, rows: int, interleaved: bool) -> Reference:
    """Token t of the new chunk sits at position past + t (what GroupQueryAttention reads from seqlens_k);
    past the cache's rows there is no right answer: it must raise."""
    p = RopeParams(head_dim=d, heads=heads, pair_layout="interleaved" if interleaved else "half", max_positions=rows)

    def reference(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        batch, seq, _ = feeds["q_0"].shape
        past = feeds["past_key_0"].shape[2]
        positions = feeds.get("position_ids", np.broadcast_to(past + np.arange(seq), (batch, seq)))
        if positions.max() >= rows:
            return None
        block = SimpleNamespace(params=p, kv_heads=kv, layers=1)
        return indexshare.reference(block, {**feeds, "position_ids": positions})

    return reference


def gqa_case(interleaved: bool, dtype: str = "float32", rows: int = 4200) -> OpCase:
    heads, kv, d = 4, 2, 16
    np_dtype, elem = np.dtype(dtype), FLOAT if dtype == "float32" else FLOAT16
    feeds = {
        "prompt 17 from 0": gqa_feeds(heads, kv, d, 1, 17, 0, np_dtype, 0),
        "prompt 32 from 0": gqa_feeds(heads, kv, d, 1, 32, 0, np_dtype, 4),
        "decode after 4150 (past 4096), batch 2": gqa_feeds(heads, kv, d, 2, 1, 4150, np_dtype, 1),
        "chunk of 64 across 4096": gqa_feeds(heads, kv, d, 1, 64, 4060, np_dtype, 2),
        "decode past the cache's rows": gqa_feeds(heads, kv, d, 1, 1, rows, np_dtype, 3),
    }
    # No repro of its own: what fails here (prompts of 32 tokens and more) fails in mha-32-queries, a smaller graph.
    return OpCase(gqa_model(heads, kv, d, rows, interleaved, elem, np_dtype), feeds, gqa_reference(heads, kv, d, rows, interleaved),
                  dtype, expect=f"every output within {BOUNDS[dtype]:g} of the float64 reference; an error past the cache's {rows} rows")


def gqa_positions_case() -> OpCase:
    """GroupQueryAttention told the positions (position_ids input), which need not be past + t: a decode step
    whose token sits at another position than the cache's length (left padding, a shifted window)."""
    heads, kv, d, rows = 4, 2, 16, 128
    f32 = np.dtype(np.float32)

    def at(batch: int, seq: int, past: int, first: int, seed: int) -> dict[str, np.ndarray]:
        positions = np.broadcast_to(first + np.arange(seq), (batch, seq)).astype(np.int64)
        return gqa_feeds(heads, kv, d, batch, seq, past, f32, seed) | {"position_ids": positions}

    feeds = {"prompt 17 at positions 0…16": at(1, 17, 0, 0, 0), "decode after 40 at position 40": at(1, 1, 40, 40, 1),
             "decode after 40 at position 7": at(1, 1, 40, 7, 2), "decode after 40 at position 100, batch 2": at(2, 1, 40, 100, 3)}
    return OpCase(gqa_model(heads, kv, d, rows, False, FLOAT, f32, positions=True), feeds, gqa_reference(heads, kv, d, rows, False),
                  repro="gqa-do-rotary-position-ids", expect="q and k rotated by position_ids (float64 reference within 1e-5)")


def mha_plain_case() -> OpCase:
    """MultiHeadAttention with no bias and no cache: the attention alone, 31 and 32 queries."""
    heads, d = 4, 16
    names = ("query", "key", "value")
    model = graph([oh.make_node("MultiHeadAttention", list(names), ["output"], domain=MSFT, num_heads=heads)],
                  [tensor(n, FLOAT, ["b", "s" if n == "query" else "t", heads * d]) for n in names],
                  [tensor("output", FLOAT, ["b", "s", heads * d])])
    rng = np.random.default_rng(5)
    feeds = {f"{s} queries, {s} keys": {n: rng.standard_normal((1, s, heads * d)).astype(np.float32) for n in names} for s in (31, 32)}
    unbiased = mha_reference(heads, d)

    def reference(f: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return unbiased({**f, "attention_bias": np.zeros((1, heads, f["query"].shape[1], f["key"].shape[1]))})

    return OpCase(model, feeds, reference, repro="mha-32-queries", expect="softmax(q·kᵀ/√d)·v within 1e-5")


# --- posexport's IndexShare block: GroupQueryAttention fed per-token cos/sin rows ------------------------


def indexshare_case(pair_layout: str) -> OpCase:
    block = indexshare.build_block(dict(head_dim=16, heads=4, pair_layout=pair_layout, base=500000.0), layers=1, kv_heads=2)
    feeds = {label: indexshare.feeds(block, batch, seq, past, np.random.default_rng(i), start)
             for i, (label, batch, seq, past, start) in enumerate((
                 ("prompt 17", 1, 17, 0, 0), ("decode at position 5000, batch 2", 2, 1, 40, 4960),
                 ("decode at position 100000", 1, 1, 8, 99992)))}
    # No repro of its own: the block hands GroupQueryAttention position_ids, which gqa-do-rotary-position-ids shows ignored.
    return OpCase(block.model, feeds, lambda f: indexshare.reference(block, f),
                  expect="the float64 reference (rope by position_ids, causal attention over past + new keys) within 1e-5")


# --- MultiHeadAttention with attention_bias --------------------------------------------------------------


def mha_model(heads: int, d: int, elem: int, bias_batch: str | int) -> onnx.ModelProto:
    inputs = [tensor("query", elem, ["b", "s", heads * d]), tensor("key", elem, ["b", "t", heads * d]),
              tensor("value", elem, ["b", "t", heads * d]), tensor("attention_bias", elem, [bias_batch, heads, "s", "t"])]
    node = oh.make_node("MultiHeadAttention", ["query", "key", "value", "", "", "attention_bias"], ["output"], domain=MSFT,
                        num_heads=heads)
    return graph([node], inputs, [tensor("output", elem, ["b", "s", heads * d])])


def mha_reference(heads: int, d: int) -> Reference:
    def reference(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        q, k, v = (np.asarray(feeds[n], np.float64) for n in ("query", "key", "value"))
        b, s, _ = q.shape
        t = k.shape[1]
        split = lambda x, n: x.reshape(b, n, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
        scores = split(q, s) @ split(k, t).transpose(0, 1, 3, 2) / math.sqrt(d) + np.asarray(feeds["attention_bias"], np.float64)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        return {"output": (weights @ split(v, t)).transpose(0, 2, 1, 3).reshape(b, s, heads * d)}

    return reference


def mha_case(dtype: str, broadcast: bool) -> OpCase:
    heads, d = 4, 16
    np_dtype, elem = np.dtype(dtype), FLOAT if dtype == "float32" else FLOAT16
    rng = np.random.default_rng(7)
    feeds = {}
    for label, b, s, t in (("prompt 17, batch 2", 2, 17, 17), ("prompt 32", 1, 32, 32), ("decode, 300 keys", 2, 1, 300),
                           ("chunk 5 of 4100 keys", 1, 5, 4100)):
        bias = alibi_reference(AlibiParams(heads=heads, causal=True, output="bias"), {"scores": np.zeros((1, heads, s, t))})
        bias = np.broadcast_to(bias, (1 if broadcast else b, heads, s, t))
        feeds[label] = {"query": rng.standard_normal((b, s, heads * d)).astype(np_dtype),
                        "key": rng.standard_normal((b, t, heads * d)).astype(np_dtype),
                        "value": rng.standard_normal((b, t, heads * d)).astype(np_dtype),
                        "attention_bias": np.ascontiguousarray(bias).astype(np_dtype)}
    shape = "[1, heads, s, t]" if broadcast else "[batch, heads, s, t]"
    # No repro of its own: only its 32-query prompt fails, as mha-32-queries does without a bias.
    return OpCase(mha_model(heads, d, elem, 1 if broadcast else "b"), feeds, mha_reference(heads, d), dtype,
                  expect=f"softmax(q·kᵀ/√d + attention_bias {shape}, ALiBi causal)·v within {BOUNDS[dtype]:g}")


# --- RotaryEmbedding with positions past its cache ---------------------------------------------------------


def rotary_case(standard: bool) -> OpCase:
    """A position past the cache has no right answer: the runtime must raise. (In range, the rope graphs'
    ort and onnx23 backends are these ops.)"""
    heads, d, rows = 2, 16, 64
    x = tensor("x", FLOAT, ["b", "s", heads * d])
    if standard:
        node = oh.make_node("RotaryEmbedding", ["x", "cos_cache", "sin_cache", "position_ids"], ["y"], num_heads=heads, interleaved=0)
    else:
        node = oh.make_node("RotaryEmbedding", ["x", "position_ids", "cos_cache", "sin_cache"], ["y"], domain=MSFT, num_heads=heads)
    model = graph([node], [x, tensor("position_ids", INT64, ["b", "s"])], [tensor("y", FLOAT, ["b", "s", heads * d])],
                  cos_sin_cache(rows, d, 10000.0, np.dtype(np.float32)), opset=23 if standard else 18)
    p = RopeParams(head_dim=d, heads=heads, max_positions=rows, layout="bsh")
    rng = np.random.default_rng(11)

    def reference(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        positions = feeds["position_ids"]
        return None if positions.max() >= rows or positions.min() < 0 else {"y": rope_reference(p, feeds)}

    feeds = {label: {"x": rng.standard_normal((1, len(pos), heads * d)).astype(np.float32), "position_ids": np.array([pos], np.int64)}
             for label, pos in (("in range", [0, 5, 63]), ("one past the cache", [62, 64]), ("far past", [10, 100000]),
                                ("negative", [-1, 3]))}
    name = "rotary-embedding-23" if standard else "contrib-rotary-embedding"
    return OpCase(model, feeds, reference, repro=f"{name}-past-cache", expect=f"rows in range rotated; an error for a position ≥ {rows} or < 0")


def gather_case() -> OpCase:
    """The guard of every posexport table lookup: Gather with an index past the table must raise."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    model = graph([oh.make_node("Gather", ["table", "index"], ["rows"], axis=0)], [tensor("index", INT64, ["n"])],
                  [tensor("rows", FLOAT, ["n", 3])], [onh.from_array(table, "table")])
    feeds = {label: {"index": np.array(index, np.int64)} for label, index in
             (("in range", [1, 3, -1]), ("one past the table", [4]), ("far past", [5, 100]), ("below -rows", [-5]))}

    def reference(f: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        index = f["index"]
        return None if (index >= 4).any() or (index < -4).any() else {"rows": table[index].astype(np.float64)}

    return OpCase(model, feeds, reference, repro="gather-out-of-range", expect="rows in range; an error for an index ≥ 4 or < −4")


def double_cast_case() -> OpCase:
    """Positions to float64 and back, as the dynamic NTK scaling forms its angles: y = float(p · 0.5)."""
    model = graph([oh.make_node("Cast", ["position_ids"], ["wide"], to=onnx.TensorProto.DOUBLE),
                   oh.make_node("Mul", ["wide", "half"], ["scaled"]), oh.make_node("Cast", ["scaled"], ["y"], to=FLOAT)],
                  [tensor("position_ids", INT64, ["n"])], [tensor("y", FLOAT, ["n"])], [onh.from_array(np.array([0.5]), "half")])
    feeds = {"positions 0…4096": {"position_ids": np.arange(0, 4097, 512, dtype=np.int64)}}
    return OpCase(model, feeds, lambda f: {"y": f["position_ids"] * 0.5}, repro="cast-to-float64",
                  expect="y = position_ids · 0.5 (exact); the graph loads")


CASES: list[tuple[str, str, str, Callable[[], OpCase]]] = [
    ("contrib ops", "GroupQueryAttention do_rotary, half", "onnxruntime-genai's wiring: full cache, positions from the past "
     "length, past 4096, past the cache", lambda: gqa_case(False)),
    ("contrib ops", "GroupQueryAttention do_rotary, interleaved", "the same with rotary_interleaved=1", lambda: gqa_case(True)),
    ("float16", "GroupQueryAttention do_rotary, half", "float16 q/k/v and cache", lambda: gqa_case(False, "float16")),
    ("contrib ops", "GroupQueryAttention do_rotary, position_ids input", "positions other than past + t (left padding, "
     "a shifted window)", gqa_positions_case),
    ("contrib ops", "MultiHeadAttention, no bias", "the attention alone, 31 and 32 queries", mha_plain_case),
    ("contrib ops", "IndexShare block (GQA, per-token rows), half", "posexport's fused block at positions 5000 and 100000",
     lambda: indexshare_case("half")),
    ("contrib ops", "IndexShare block (GQA, per-token rows), interleaved", "the same, interleaved pairs",
     lambda: indexshare_case("interleaved")),
    ("contrib ops", "MultiHeadAttention attention_bias [1, h, s, t]", "an ALiBi bias broadcast over the batch, 4100 keys",
     lambda: mha_case("float32", True)),
    ("contrib ops", "MultiHeadAttention attention_bias [b, h, s, t]", "a bias per batch row", lambda: mha_case("float32", False)),
    ("float16", "MultiHeadAttention attention_bias [1, h, s, t]", "float16", lambda: mha_case("float16", True)),
    ("standard ops", "Cast int64 → float64 → float32", "how the dynamic scaling forms its angles (in float64)", double_cast_case),
    ("out-of-range positions", "com.microsoft.RotaryEmbedding", "position_ids past the cache or negative must raise",
     lambda: rotary_case(False)),
    ("out-of-range positions", "RotaryEmbedding-23", "the standard op, the same", lambda: rotary_case(True)),
    ("out-of-range positions", "Gather past the table", "the guard of posexport's lookups: an index past the table must raise",
     gather_case),
]


# --- judging ---------------------------------------------------------------------------------------------


def load_error(error: BaseException) -> str:
    """onnxruntime's reason, without its build's source path and function signature."""
    text = str(error).split("ERROR_MESSAGE: ")[-1]
    return re.sub(r"^\S+\.cc:\d+ [^!]*? (?=\S+ was false\.)|^\S+\.cc:\d+ ", "", text)[:300]


def outcome(case: OpCase, label: str, session: Any) -> tuple[str, float, str]:
    """(pass | fail | error, worst error, message) of one feeds label on one session."""
    feeds = case.feeds[label]
    expected = case.reference(feeds)
    try:
        got = session.run(feeds)
    except Exception as e:  # noqa: BLE001 - a runtime's own error is the outcome
        message = str(e).split("ERROR_MESSAGE: ")[-1].split("; at ")[0]
        return ("pass", 0.0, "raised") if expected is None else ("error", math.inf, message[:200])
    if expected is None:
        values = ", ".join(f"{np.asarray(v, np.float64).ravel()[:3].round(3).tolist()}" for v in got.values())
        return "fail", math.inf, f"no error: returned {values}"
    worst, bad = 0.0, ""
    for name, ref in expected.items():
        cmp = compare(np.asarray(got[name]), ref, BOUNDS[case.dtype])
        worst = max(worst, cmp.normalised)
        if not cmp.passed and not bad:
            bad = f"{name} error {cmp.normalised:.1e} > {cmp.bound:.0e}"
    return ("fail" if bad else "pass"), worst, bad


def judge(case: OpCase, runtimes: Sequence[str]) -> dict[str, str]:
    """Each runtime's cell: every feeds label passed (its worst error), or the first that failed."""
    cells = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "case.onnx"
        onnx.save_model(case.model, path)
        for name in runtimes:
            cells[name] = runtime_cell(case, name, path)
    return cells


def runtime_cell(case: OpCase, name: str, path: Path) -> str:
    runtime = get_runtime(name)
    ok, why = runtime.supports_model(path)
    if not ok:
        return f"unsupported: {why}"
    try:
        session = runtime.load_model(path)
    except Exception as e:  # noqa: BLE001 - a valid graph that does not load is the runtime's failure
        case.found[name] = {label: f"fails to load: {load_error(e)}" for label in list(case.feeds)[:1]}
        return f"**FAIL** to load: {load_error(e)}"
    results = {label: outcome(case, label, session) for label in case.feeds}
    failed = {label: r for label, r in results.items() if r[0] != "pass"}
    worst = max((r[1] for r in results.values() if r[0] == "pass"), default=0.0)
    share = webgpu_share(getattr(session, "placements", "")) if name == "ort-webgpu" else ""
    where = f" ({share})" if share else ""
    if failed:
        case.found[name] = {label: r[2] for label, r in failed.items()}
        return f"**FAIL** {len(failed)}/{len(results)}: " + "; ".join(f"{label}: {r[2]}" for label, r in failed.items()) + where
    raised = " (raises where it must)" if any(r[2] == "raised" for r in results.values()) else ""
    return f"pass {len(results)}/{len(results)}, worst {worst:.1e}{raised}{where}"


def webgpu_share(placements: str) -> str:
    """'n of m nodes on WebGPU', from ort-webgpu's placements line ('' when it has none)."""
    counts = {provider: int(n) for n, provider in re.findall(r"(\d+) on (\w+)", placements)}
    total = sum(counts.values())
    return f"{counts.get('WebGpuExecutionProvider', 0)} of {total} nodes on WebGPU" if total else ""


def smallest_failing(case: OpCase) -> str:
    failing = {label for found in case.found.values() for label in found}
    return min(failing, key=lambda label: sum(a.nbytes for a in case.feeds[label].values()))


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """np.savez's format with fixed entry dates, so that the same arrays give the same bytes."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(array), allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buffer.getvalue())


def write_repros(folder: Path, cases: Sequence[tuple[str, str, OpCase]], versions: Sequence[str]) -> list[str]:
    """docs/web-repros/: for every op case some runtime got wrong, its graph (NAME.onnx), the smallest failing
    feeds with the float64 answer (NAME.npz: the feeds, and expected.OUTPUT arrays when there is one), and a
    README saying what each runtime gave."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in [*folder.glob("*.onnx"), *folder.glob("*.npz")]:
        old.unlink()
    lines = ["# Minimal graphs of what onnxruntime-web gets wrong", "",
             "Written by `make web-conformance` (matrix/web.py, matrix/web_ops.py); do not edit by hand. Each graph is the",
             "smallest case of [the conformance table](../runtimes.md#onnxruntime-web-conformance) that failed; NAME.npz holds",
             "the feeds that failed and, under `expected.OUTPUT`, the float64 answer (none where the runtime must raise):", "",
             "```python", "arrays = dict(np.load('mha-32-queries.npz'))",
             "expected = {k.removeprefix('expected.'): arrays.pop(k) for k in list(arrays) if k.startswith('expected.')}",
             "# run mha-32-queries.onnx on `arrays` in onnxruntime-web; compare with `expected`", "```", "",
             *versions, ""]
    written = []
    for group, label, case in cases:
        if not case.repro or not case.found or "ort-cpu" in case.found:  # wrong on onnxruntime CPU too: not the web's fault
            continue
        chosen = smallest_failing(case)
        expected = case.reference(case.feeds[chosen]) or {}
        (folder / f"{case.repro}.onnx").write_bytes(case.model.SerializeToString(deterministic=True))
        save_npz(folder / f"{case.repro}.npz", {**case.feeds[chosen], **{f"expected.{k}": v for k, v in expected.items()}})
        lines += [f"## {case.repro}", "", f"{group} / {label}: feeds `{chosen}`. Right answer: {case.expect}.", ""]
        lines += md_table(("runtime", "what it gave (every failing feeds label)"),
                          ((name, "; ".join(f"{feeds}: {what}" for feeds, what in found.items())) for name, found in case.found.items()))
        written.append(case.repro)
    (folder / "README.md").write_text("\n".join(lines))
    return written
