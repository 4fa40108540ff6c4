"""`posexport bench --model FIXED --against ORIGINAL`: two whole models timed in one process (a child per
call, so that onnxruntime dying on one is that row's note), interleaved round-robin (timing.time_interleaved) on the same seeded feeds: prompts of each length, and a decode step
(one token after that many cached positions; a model without past key/values inputs gets the one token at
that position). Each row has both medians and their ratio; the files' sizes are reported, and the target
is the patched model within 1.03× the original on every call."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from ..contract import SCHEMA_VERSION
from ..errors import PosexportError, one_line
from ..runtimes import SessionOptions
from ..runtimes.isolated import DEFAULT_TIMEOUT, ChildError, RuntimeCrash, call_in_child, check_timeout
from ..runtimes.ort import OrtModelSession
from ..verdicts.model_feeds import FeedCase, Signature, make_feeds, signature
from .engine import machine
from .timing import finite_or_null, time_interleaved

TARGET = 1.03  # a patched model's median over the original's, on every call


@dataclass
class ModelRow:
    call: str
    seq: int
    past: int
    model_ms: float = float("nan")
    against_ms: float = float("nan")
    model_iqr_ms: float = float("nan")
    against_iqr_ms: float = float("nan")
    ratio: float = float("nan")
    note: str = ""


@dataclass
class ModelBench:
    meta: dict[str, Any]
    rows: list[ModelRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return finite_or_null({"schema_version": SCHEMA_VERSION, "meta": self.meta, "rows": [asdict(r) for r in self.rows],
                               "target": target(self.rows)})


def file_bytes(path: Path) -> int:
    """The model file and every external data file it names, in bytes."""
    model = onnx.load(str(path), load_external_data=False)
    names = {entry.value for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
             for entry in t.external_data if entry.key == "location"}
    return path.stat().st_size + sum(os.path.getsize(path.parent / name) for name in sorted(names))


def has_past(sig: Signature) -> bool:
    return any("past" in name for name, _, _ in sig.inputs)


def feeds_for(sig: Signature, case: FeedCase) -> tuple[dict[str, np.ndarray], str]:
    """The call's feeds, and a note when a decode step runs without a cache (no past inputs)."""
    if not case.past or has_past(sig):
        return make_feeds(sig, case), ""
    feeds = make_feeds(sig, FeedCase(case.seq))
    if "position_ids" not in feeds:
        raise PosexportError(f"a decode step at position {case.past}: the model has neither past key/values nor position_ids inputs")
    feeds["position_ids"] = feeds["position_ids"] + case.past
    return feeds, "no past key/values inputs: one token at that position, without a cache"


def bound(path: Path, feeds: dict[str, np.ndarray], threads: int) -> Any:
    return OrtModelSession(path, ["CPUExecutionProvider"], True, SessionOptions(threads, spinning=False)).bind(feeds)


def call_label(case: FeedCase) -> str:
    return f"prompt {case.seq}" if not case.past else f"decode at position {case.past}"


def time_call(model: Path, against: Path, sig: Signature, case: FeedCase, threads: int, warmup: int, repeats: int) -> ModelRow:
    row = ModelRow(call_label(case), case.seq, case.past)
    feeds, row.note = feeds_for(sig, case)
    calls = []
    for who, path in (("--model", model), ("--against", against)):
        try:
            calls.append(bound(path, feeds, threads))
        except Exception as e:  # the runtime's own refusal (e.g. a cache shorter than the call) is the row's result
            row.note = f"{who} {path.name} fails: {one_line(e, 200)}"
            return row
    (row.model_ms, row.model_iqr_ms, _), (row.against_ms, row.against_iqr_ms, _) = time_interleaved(calls, warmup, repeats)
    row.ratio = row.model_ms / row.against_ms
    return row


def timed_row(*call: Any) -> dict[str, Any]:
    return asdict(time_call(*call))


def time_isolated(model: Path, against: Path, sig: Signature, case: FeedCase, threads: int, warmup: int, repeats: int,
                  timeout: float = DEFAULT_TIMEOUT) -> ModelRow:
    """One call timed in a child process (runtimes.isolated; the timing runs inside it) within ``timeout``
    seconds: onnxruntime dying on either model, failing or running past the deadline is the row's note,
    and the bench goes on. Feeds are checked here first: a prompt's that cannot be made (a dimension posexport
    cannot size) end the bench in one line, a decode step the model cannot take is its row's note."""
    label = call_label(case)
    try:
        feeds_for(sig, case)
    except PosexportError as e:
        if not case.past:
            raise
        return ModelRow(label, case.seq, case.past, note=str(e))
    try:
        return ModelRow(**call_in_child(timed_row, (model, against, sig, case, threads, warmup, repeats), "onnxruntime",
                                        f"timing {label}", timeout))
    except (RuntimeCrash, ChildError) as crash:
        return ModelRow(label, case.seq, case.past, note=str(crash))


def positions(text: str, option: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """Comma-separated lengths or positions ('' = ``default``), each a whole number ≥ 1."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not all(item.isdigit() and int(item) >= 1 for item in items):
        raise PosexportError(f"{option} {text}: give whole numbers ≥ 1, comma-separated (e.g. 512,2048)")
    return tuple(int(item) for item in items) or default


def bench_models(model: str | Path, against: str | Path, prompts: Sequence[int] = (512, 2048), decode: Sequence[int] = (2048,),
                 threads: int = 1, warmup: int = 5, repeats: int = 30, dims: dict[str, int] | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> ModelBench:
    """Prompts of each length and a decode step at each position, both models interleaved; ``dims`` sizes
    symbolic input dimensions (as model-parity's --dim), ``timeout`` bounds each call's child."""
    model, against = Path(model), Path(against)
    check_timeout(timeout)
    for option, path in (("--model", model), ("--against", against)):
        if not (path.exists() or path.is_symlink()):
            raise PosexportError(f"{option} {path}: no such file")
    sig = signature(model, dims)
    theirs = signature(against, dims)
    if [i[0] for i in sig.inputs] != [i[0] for i in theirs.inputs]:
        raise PosexportError(f"--against {against}: its inputs ({', '.join(i[0] for i in theirs.inputs)}) are not --model's "
                             f"({', '.join(i[0] for i in sig.inputs)}); compare a patched model with its original")
    meta = machine() | {"model": str(model), "against": str(against), "model_bytes": file_bytes(model), "against_bytes": file_bytes(against),
            "threads": threads, "warmup": warmup, "repeats": repeats}
    cases = [FeedCase(n) for n in prompts] + [FeedCase(1, n) for n in decode]
    return ModelBench(meta, [time_isolated(model, against, sig, c, threads, warmup, repeats, timeout) for c in cases])


def target(rows: Sequence[ModelRow]) -> dict[str, Any]:
    """Met when every call that both models ran is within TARGET of the original."""
    timed = [r for r in rows if np.isfinite(r.ratio)]
    worst = max(timed, key=lambda r: r.ratio, default=None)
    return {"target": f"--model ≤ {TARGET}× --against on every call", "met": bool(timed) and worst.ratio <= TARGET,
            "worst": None if worst is None else {"call": worst.call, "ratio": round(worst.ratio, 3)},
            "untimed": [r.call for r in rows if not np.isfinite(r.ratio)]}
