"""Whole-model parity: the same seeded feeds, generated from a model's signature (token ids within the
vocabulary, attention masks, position ids, past key/values of a chosen length), run through a model and
its reference on every runtime, compared output by output with the normalised error
max|out − ref| / max(1, max|ref|). The reference is another ONNX model (the original, or the same model
with exact caches) or a transformers model run in float64 (see ``hf_reference``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from .. import guarded
from ..errors import PosexportError, one_line
from ..progress import progress
from .genai import head_size

RUNTIMES = {"ort": True, "ort-noopt": False}  # onnxruntime CPU with graph optimisation on / off
TOLERANCE = 1e-4


@dataclass(frozen=True)
class FeedCase:
    """One call: ``seq`` new tokens after ``past`` cached ones (positions past … past+seq−1)."""

    seq: int
    past: int = 0
    batch: int = 1

    @property
    def label(self) -> str:
        return f"prompt {self.seq}" if not self.past else f"{self.seq} token(s) at position {self.past}"


@dataclass
class Signature:
    """What a model takes: inputs (name, ONNX type, dims) and the sizes its symbolic dims need."""

    inputs: list[tuple[str, int, list[int | str]]]
    outputs: list[str]
    vocab: int
    dims: dict[str, int] = field(default_factory=dict)


def vocabulary(model: onnx.ModelProto, ids: str) -> int:
    """Rows of the embedding table that input_ids index (the first Gather reading them)."""
    sizes = {t.name: list(t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == ids and node.input[0] in sizes:
            return int(sizes[node.input[0]][0])
    raise PosexportError(f"cannot tell the vocabulary size: no Gather reads {ids!r} from an embedding table")


def signature(path: str | Path, dims: Mapping[str, int] | None = None) -> Signature:
    path = Path(path)
    model = guarded.load_model(path)
    guarded.external_data(model, path)  # every location checked before onnxruntime opens any
    inputs = [(i.name, i.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
              for i in model.graph.input]
    known = dict(dims or {})
    head = head_size(path.parent)
    if head is not None:
        known.setdefault("kv_cache_dim", head)
    ids = next((name for name, _, _ in inputs if "input_ids" in name), None)
    vocab = vocabulary(model, ids) if ids else 0
    return Signature(inputs, [o.name for o in model.graph.output], vocab, known)


# [batch, seq] inputs whose axes mean the same whatever an exporter names them.
ROLES: dict[str, Callable[[FeedCase], list[int]]] = {
    "input_ids": lambda c: [c.batch, c.seq],
    "position_ids": lambda c: [c.batch, c.seq],
    "attention_mask": lambda c: [c.batch, c.past + c.seq],
}


def named_sizes(sig: Signature, case: FeedCase) -> dict[str, int]:
    """Sizes of the symbolic dims that the [batch, seq] inputs fix (e.g. 'b' and 's' of a TorchScript export)."""
    sizes: dict[str, int] = {}
    for name, _, dims in sig.inputs:
        role = next((ROLES[r] for r in ROLES if r in name), None)
        if role is not None and len(dims) == 2:
            sizes |= {str(d).lower(): n for d, n in zip(dims, role(case)) if isinstance(d, str) and d}
    return sizes | sig.dims


def size_of(dim: int | str, case: FeedCase, known: Mapping[str, int], name: str) -> int:
    if isinstance(dim, int) and dim > 0:
        return dim
    lowered = str(dim).lower()
    if lowered in known:
        return known[lowered]
    if "total" in lowered or "all" in lowered:
        return case.past + case.seq
    if "past" in lowered:
        return case.past
    if "batch" in lowered:
        return case.batch
    if "seq" in lowered:
        return case.seq
    raise PosexportError(f"input {name!r}: cannot size its dimension {dim!r}; give it with --dim {dim}=N")


def make_feeds(sig: Signature, case: FeedCase, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded feeds for one case; the same seed and case give the same arrays for every model."""
    rng = np.random.default_rng(seed)
    known = named_sizes(sig, case)
    feeds = {}
    for name, elem, dims in sig.inputs:
        shape = [size_of(d, case, known, name) for d in dims]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        if "input_ids" in name:
            value = rng.integers(0, sig.vocab, size=shape)
        elif "attention_mask" in name:
            value = np.ones(shape)
        elif "position_ids" in name:
            value = np.broadcast_to(np.arange(case.past, case.past + case.seq), shape)
        elif np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(shape)
        else:
            value = np.zeros(shape)
        feeds[name] = np.ascontiguousarray(value.astype(dtype))
    return feeds


Runner = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


def ort_runner(path: str | Path, optimize: bool = True) -> Runner:
    """onnxruntime CPU session of the model at ``path`` (external data beside it)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    guarded.external_data(guarded.load_model(path), path)  # checked here too: the reference and the original
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own errors have no common base class
        raise PosexportError(f"{path}: onnxruntime cannot load it ({one_line(e, 300)})") from None
    names = [o.name for o in session.get_outputs()]

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(names, session.run(names, feeds)))

    return run


def error(out: np.ndarray, ref: np.ndarray) -> float:
    """max|out − ref| / max(1, max|ref|), in float64."""
    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(out - ref), initial=0.0) / max(1.0, float(np.max(np.abs(ref), initial=0.0))))


# A run's outputs, or None and the runtime's message.
Attempt = tuple["dict[str, np.ndarray] | None", str]


def attempt(runner: Runner, feeds: dict[str, np.ndarray]) -> Attempt:
    try:
        return runner(feeds), ""
    except Exception as e:  # a runtime's own error is the result we report (e.g. a cache too short)
        text = " ".join(str(e).split())
        return None, text.split("Status Message: ")[-1][:300]


def compare(got: Attempt, ref: Attempt, outputs: list[str] | None) -> list[dict[str, Any]]:
    """Rows (output, error, or who failed) of one case: a model's attempt against the reference's."""
    (got_out, model_failure), (ref_out, ref_failure) = got, ref
    if model_failure or ref_failure:
        return [{"output": "(all)", "model_fails": model_failure, "reference_fails": ref_failure}]
    return [{"output": name, "model_fails": "", "reference_fails": "",
             "error": error(got_out[name], ref_out[name]) if name in ref_out else float("inf")}
            for name in outputs or sorted(got_out)]


def with_original(rows: list[dict[str, Any]], original: list[dict[str, Any]]) -> None:
    """Add the original model's error (or failure) to each row of the model under test."""
    by_output = {r["output"]: r for r in original}
    for row in rows:
        theirs = by_output.get(row["output"], original[0])
        row["original_fails"] = theirs["model_fails"]
        if "error" in theirs:
            row["original_error"] = theirs["error"]


def runtime_rows(sig: Signature, runtime: str, model: str | Path, reference: str | Path | Runner, original: str | Path | None,
                 cases: list[FeedCase], seed: int, outputs: list[str] | None, tolerance: float,
                 advance: Callable[[float], None]) -> list[dict[str, Any]]:
    """The rows of one runtime. Each session is made once, from the model's path (onnxruntime reads or
    maps the external data itself), each case's outputs are compared as they come and dropped, and the
    sessions go when the runtime is done, before the next runtime's are made."""
    run_model = ort_runner(model, RUNTIMES[runtime])
    run_ref = reference if callable(reference) else ort_runner(reference, RUNTIMES[runtime])
    run_original = ort_runner(original, RUNTIMES[runtime]) if original is not None else None
    rows = []
    for index, case in enumerate(cases):
        feeds = make_feeds(sig, case, seed + index)
        ref = attempt(run_ref, feeds)
        case_rows = compare(attempt(run_model, feeds), ref, outputs)
        if run_original is not None:
            with_original(case_rows, compare(attempt(run_original, feeds), ref, outputs))
        for row in case_rows:
            row |= {"runtime": runtime, "case": case.label}
            row["ok"] = not row["model_fails"] and row.get("error", 0.0) <= tolerance
            rows.append(row)
        advance(1)
    return rows


def model_parity(model: str | Path, reference: str | Path | Runner, cases: list[FeedCase], *, runtimes: tuple[str, ...] = ("ort",),
                 tolerance: float = TOLERANCE, seed: int = 0, dims: Mapping[str, int] | None = None,
                 outputs: list[str] | None = None, original: str | Path | None = None) -> dict[str, Any]:
    """Every case on every runtime: ``model`` against ``reference`` (a model path, run on the same
    runtime, or a runner such as ``hf_reference``). A row passes when the model runs and its error is
    within ``tolerance``; a reference that fails where the model runs is reported, not failed. With
    ``original`` (the model before a patch), each row also shows where the original fails or drifts."""
    sig = signature(model, dims)
    rows: list[dict[str, Any]] = []
    with progress("model-parity", len(runtimes) * len(cases), " cases") as advance:
        for runtime in runtimes:
            if runtime not in RUNTIMES:
                raise PosexportError(f"--runtimes {runtime}: choose from {', '.join(RUNTIMES)}")
            rows += runtime_rows(sig, runtime, model, reference, original, cases, seed, outputs, tolerance, advance)
    return {"model": str(model), "reference": str(reference) if not callable(reference) else getattr(reference, "label", "runner"),
            "tolerance": tolerance, "rows": rows, "ok": all(r["ok"] for r in rows)}
