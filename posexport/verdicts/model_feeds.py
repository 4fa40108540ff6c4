"""The feeds of whole-model parity: seeded, generated from a model's signature (token ids within the
vocabulary, attention masks, position ids, past key/values of a chosen length), the same arrays for the
model, its reference and every runner."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from .. import guarded, limits
from ..errors import PosexportError
from ..onnxgraph.fused import reads_caches
from ..onnxgraph.genai import head_size
from ..onnxgraph.graph import node_label
from .hf_oracle import cache_slot
from .tokens import Tokens



@dataclass(frozen=True)
class FeedCase:
    """One call: ``seq`` new tokens after ``past`` cached ones (positions past … past+seq−1)."""

    seq: int
    past: int = 0
    batch: int = 1

    def __post_init__(self) -> None:
        for option, value, least in (("--prompt", self.seq, 1), ("--past", self.past, 0), ("batch", self.batch, 1)):
            if type(value) is not int or value < least:
                raise PosexportError(f"{option} {value!r}: expected a whole number ≥ {least}")

    @property
    def option(self) -> str:
        """The option that asked for this case, with its value."""
        return f"--past {self.past}" if self.past else f"--prompt {self.seq}"

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
    float_type: str = "float32"  # of the first floating output (the logits): what the model computes in


def vocabulary(model: onnx.ModelProto, ids: str) -> int:
    """Rows of the embedding table that input_ids index: the logits' last dimension where the export fixes
    it, else the table the first Gather reading input_ids gathers from: stored, stored and transposed
    (onnxruntime-genai's tied embeddings gather from Transpose(lm_head)) or block-quantized (int4)."""
    logits = [o for o in model.graph.output if o.name.endswith("logits")]
    dims = logits[0].type.tensor_type.shape.dim if logits else []
    if dims and dims[-1].dim_value > 0:
        return int(dims[-1].dim_value)
    sizes = {t.name: list(t.dims) for t in model.graph.initializer}
    producer = {out: node for node in model.graph.node for out in node.output}
    for node in model.graph.node:
        if node.op_type in ("Gather", "GatherBlockQuantized") and len(node.input) > 1 and node.input[1] == ids:
            rows = table_rows(node.input[0], sizes, producer)
            if rows:
                return rows
    return 0  # unknown: random ids cannot be drawn (UNKNOWN_VOCABULARY), ids from a text can


UNKNOWN_VOCABULARY = ("cannot tell the vocabulary size: the logits' last dimension is not fixed and no Gather reads the input ids "
                      "from an embedding table (stored, or a Transpose of one); give --text FILE or --tokens FILE")


def table_rows(name: str, sizes: Mapping[str, list[int]], producer: Mapping[str, onnx.NodeProto]) -> int | None:
    """Rows of a stored table, or of the transpose of a stored [columns, rows] one."""
    if name in sizes and sizes[name]:
        return int(sizes[name][0])
    node = producer.get(name)
    if node is not None and node.op_type == "Transpose" and node.input[0] in sizes and len(sizes[node.input[0]]) == 2:
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), [1, 0])
        return int(sizes[node.input[0]][perm[0]])
    return None


def checked_model(path: str | Path) -> onnx.ModelProto:
    """The model's protobuf (no external data), read through posexport.guarded with every external-data
    location checked and its fused rotary caches well formed, before any runtime opens it."""
    model = guarded.load_model(path)
    guarded.external_data(model, path)
    check_caches(model, path)
    return model


def check_caches(model: onnx.ModelProto, path: str | Path) -> None:
    """Stored cos/sin caches of a fused rotary op are [rows, n] pairs of one shape: onnxruntime aborts the
    whole process on some other shapes (a 1-D cache), so they are refused before it sees them."""
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        spec = reads_caches(node)
        if spec is None or node.input[spec[0]] not in dims or node.input[spec[1]] not in dims:
            continue
        cos, sin = dims[node.input[spec[0]]], dims[node.input[spec[1]]]
        if len(cos) != 2 or cos != sin or 0 in cos:
            raise PosexportError(f"{path}: {node_label(node)} reads cos/sin caches of shapes {cos} and {sin}; a fused rotary "
                                 "op needs two [rows, rotary_dim/2] caches of one shape (onnxruntime would abort on these)")


def signature(path: str | Path, dims: Mapping[str, int] | None = None) -> Signature:
    path = Path(path)
    model = checked_model(path)
    inputs = [(i.name, i.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
              for i in model.graph.input]
    known = dict(dims or {})
    head = head_size(path.parent)
    if head is not None:
        known.setdefault("kv_cache_dim", head)
    ids = next((name for name, _, _ in inputs if "input_ids" in name), None)
    vocab = vocabulary(model, ids) if ids else 0
    floats = [FLOAT_TYPES[o.type.tensor_type.elem_type] for o in model.graph.output if o.type.tensor_type.elem_type in FLOAT_TYPES]
    return Signature(inputs, [o.name for o in model.graph.output], vocab, known, floats[0] if floats else "float32")


FLOAT_TYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64", onnx.TensorProto.FLOAT16: "float16",
               onnx.TensorProto.BFLOAT16: "bfloat16"}
# [batch, seq] inputs whose axes mean the same whatever an exporter names them.
ROLES: dict[str, Callable[[FeedCase], list[int]]] = {
    "input_ids": lambda c: [c.batch, c.seq],
    "position_ids": lambda c: [c.batch, c.seq],
    "attention_mask": lambda c: [c.batch, c.past + c.seq],
}


# words that make a dim a length when its name holds one (as guessed reads names)
LENGTH_WORDS = ("total", "all", "past", "seq")


def role_of(name: str) -> Callable[[FeedCase], list[int]] | None:
    return next((ROLES[r] for r in ROLES if r in name), None)


def named_sizes(sig: Signature, case: FeedCase) -> dict[str, int]:
    """Sizes of the symbolic dims that the [batch, seq] inputs fix (e.g. 'b' and 's' of a TorchScript export),
    and the past length for a past key/value input's one axis that nothing else sizes (transformers'
    exporter names it after a torch.export symbol, e.g. 's53')."""
    sizes: dict[str, int] = {}
    for name, _, dims in sig.inputs:
        role = role_of(name)
        if role is not None and len(dims) == 2:
            sizes |= {str(d).lower(): n for d, n in zip(dims, role(case)) if isinstance(d, str) and d}
    sizes |= sig.dims
    for name, _, dims in sig.inputs:
        unsized = {str(d).lower() for d in dims if guessed(d, case, sizes) is None}
        named_length = any(word in str(d).lower() for d in dims for word in LENGTH_WORDS)
        if cache_slot(name) is not None and len(unsized) == 1 and not named_length:
            sizes[unsized.pop()] = case.past
    return sizes


def fixed_size(dim: int | str) -> int | None:
    """A dimension's fixed size: a number, or a symbol that is one (transformers' exporter writes '2', '16')."""
    if isinstance(dim, int):
        return dim if dim > 0 else None
    return int(dim) if dim.isdigit() and int(dim) > 0 else None


def guessed(dim: int | str, case: FeedCase, known: Mapping[str, int]) -> int | None:
    """A dimension's size: fixed, given, or told by its name; None when nothing tells it."""
    fixed, lowered = fixed_size(dim), str(dim).lower()
    if fixed is not None:
        return fixed
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
    return None


def size_of(dim: int | str, case: FeedCase, known: Mapping[str, int], name: str) -> int:
    size = guessed(dim, case, known)
    if size is None:
        raise PosexportError(f"input {name!r}: cannot size its dimension {dim!r}; give it with --dim {dim}=N")
    return size


def misfit(sig: Signature, case: FeedCase) -> str:
    """Why the model cannot take this case (a [batch, seq] input fixed at other sizes: a one-token decode
    step given a prompt), or ''."""
    for name, _, dims in sig.inputs:
        role = role_of(name)
        if role is not None and len(dims) == 2 and any(fixed_size(d) not in (None, n) for d, n in zip(dims, role(case))):
            return f"the model's input {name!r} is fixed at {[fixed_size(d) or d for d in dims]}: {case.label} needs {role(case)}"
    return ""


def feed_shapes(sig: Signature, case: FeedCase, sized: bool = True) -> dict[str, tuple[list[int], np.dtype]]:
    """Each input's shape and dtype for one case, refused before anything is allocated when the feeds
    (drawn in float64 or int64, then cast) would pass the byte budget, naming the case's option. Not
    ``sized``: a dimension nothing sizes counts as 1 instead of being refused (a lower bound, to check early)."""
    known = named_sizes(sig, case)

    def size(dim: int | str, name: str) -> int:
        return size_of(dim, case, known, name) if sized else guessed(dim, case, known) or 1

    shapes = {name: ([size(d, name) for d in dims], np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)))
              for name, elem, dims in sig.inputs}
    sizes = {name: math.prod(shape) * (limits.FLOAT64 + dtype.itemsize) for name, (shape, dtype) in shapes.items()}
    largest = max(sizes, key=sizes.__getitem__, default=None)
    if largest is not None:
        shape, dtype = shapes[largest]
        limits.check_allocation(case.option, f"its feeds (input {largest!r} alone {shape} of {dtype}), drawn in "
                                             "64 bits then cast,", sum(sizes.values()))
    return shapes


def check_cases(sig: Signature, cases: list[FeedCase], seed: int) -> None:
    """Before any runtime starts: the seed, and the feeds of every case the model can take within the budget
    (a dimension nothing sizes is refused when the feeds are made, as before)."""
    check_seed(seed)
    for case in cases:
        if not misfit(sig, case):
            feed_shapes(sig, case, sized=False)


def check_seed(seed: int) -> None:
    if type(seed) is not int or seed < 0:
        raise PosexportError(f"--seed {seed!r}: expected a whole number ≥ 0")


def make_feeds(sig: Signature, case: FeedCase, seed: int = 0, tokens: Tokens | None = None) -> dict[str, np.ndarray]:
    """Seeded feeds for one case; the same seed and case give the same arrays for every model. Token ids
    come from ``tokens`` when they hold ids (the case's prompt cut from a text), else are random."""
    check_seed(seed)
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (shape, dtype) in feed_shapes(sig, case).items():
        if "input_ids" in name:
            if tokens is not None and tokens.ids is not None:
                rng.integers(0, max(sig.vocab, 1), size=shape)  # drawn all the same: the other feeds stay as they were
                value = tokens.prompt(shape[0], shape[1], sig.vocab)
            elif sig.vocab:
                value = rng.integers(0, sig.vocab, size=shape)
            else:
                raise PosexportError(UNKNOWN_VOCABULARY)
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


def takes_feeds_of(sig: Signature, other: onnx.ModelProto, path: Path, option: str) -> None:
    """A model run on the feeds made for ``sig`` (--against, --original) takes no input they lack: it is the same
    model before a change. A graph `posexport build` wrote is what `posexport parity` checks."""
    given = [name for name, _, _ in sig.inputs]
    lacking = [i.name for i in other.graph.input if i.name not in given]
    if not lacking:
        return
    built = f"; a graph `posexport build` wrote is checked with `posexport parity {path}`" if other.producer_name == "posexport" else ""
    raise PosexportError(f"{option} {path}: takes {', '.join(lacking)}, which --model's feeds lack ({', '.join(given)}); {option} is "
                         f"the same model before a change (e.g. the original export of a patched one), run on the same feeds{built}")
