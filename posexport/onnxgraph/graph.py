"""An exported model as surgery sees it: nodes with their producers and consumers, initializers whose
values are read on demand (external data by offset and length, never the whole file), and a deterministic
writer that keeps external data external, beside the output, carrying the bytes it does not change."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh

from .. import guarded
from ..errors import PosexportError, one_line
from ..guarded import ExternalTensor, is_external, model_tensors
from .external import DataFile, read_tensor

# Tensors at least this large go to the external data file when the source model used one.
EXTERNAL_THRESHOLD = 1024


def load(path: str | Path) -> onnx.ModelProto:
    """The model's graph, without its external data: tensors stored outside keep their locations, and
    are read on demand, each by offset and length (``Graph.array``)."""
    return guarded.load_model(path)


@dataclass
class Graph:
    """Index of a model's main graph: who produces and who consumes each tensor. ``source`` is the model
    file its external data lies beside (None for a model held whole in memory)."""

    model: onnx.ModelProto
    source: Path | None = None
    producer: dict[str, onnx.NodeProto] = field(default_factory=dict)
    consumers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    initializers: dict[str, onnx.TensorProto] = field(default_factory=dict)
    stored: dict[str, ExternalTensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        g = self.model.graph
        self.initializers = {t.name: t for t in g.initializer}
        for node in g.node:
            for name in node.output:
                if name:
                    self.producer[name] = node
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(node)
        if any(is_external(t) for t in model_tensors(self.model)):
            if self.source is None:
                raise PosexportError("the model keeps tensors in external data that is not loaded: give its path, "
                                     "or load it with onnx.load(path) (external data included)")
            self.stored = {t.name: t for t in guarded.external_data(self.model, self.source)}

    @property
    def outputs(self) -> set[str]:
        return {o.name for o in self.model.graph.output}

    def is_constant(self, name: str) -> bool:
        """An initializer or a Constant node's output (known without reading its value)."""
        node = self.producer.get(name)
        return name in self.initializers or (node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"))

    def tensor(self, tensor: onnx.TensorProto) -> np.ndarray:
        """A tensor's value, read from its external data file (that tensor's bytes only) when stored there."""
        if is_external(tensor):
            return read_tensor(self.stored[tensor.name])
        return values(tensor)

    def array(self, name: str) -> np.ndarray | None:
        """The value of an initializer or a Constant node's output, else None."""
        if name in self.initializers:
            return self.tensor(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.name == "value":
                    return self.tensor(a.t)
                if a.name in ("value_float", "value_int", "value_floats", "value_ints"):
                    return np.array(onnx.helper.get_attribute_value(a))
        return None

    def consumers_of(self, name: str, op_type: str) -> list[onnx.NodeProto]:
        return [n for n in self.consumers.get(name, []) if n.op_type == op_type]

    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))


def whole_length(value: float | np.ndarray | None, signed: bool = False) -> int | None:
    """A stored scalar as a length (a regime switch's L0, a row offset when ``signed``): a finite whole
    number below 2^62 (≥ 0 unless ``signed``), else None: a NaN or 1e300 is no length a rope could have."""
    if value is None or np.size(value) != 1:
        return None
    number = float(np.reshape(value, ()))
    fits = math.isfinite(number) and number == int(number) and abs(number) < 2 ** 62 and (signed or number >= 0)
    return int(number) if fits else None


def values(tensor: onnx.TensorProto) -> np.ndarray:
    """A tensor's values; one that cannot be read (a dtype onnx does not know, fewer values than its dims
    say) is a user error naming it."""
    try:
        return onh.to_array(tensor)
    except (ValueError, TypeError, KeyError) as e:
        raise PosexportError(f"tensor {tensor.name[:80]!r}: cannot read its values ({one_line(e, 200)})") from None


def set_constant(graph: Graph, name: str, value: np.ndarray) -> None:
    """Replace the value of an initializer or of a Constant node's output."""
    if name in graph.initializers:
        graph.initializers[name].CopyFrom(onh.from_array(value, name))
        return
    node = graph.producer[name]
    del node.attribute[:]
    node.attribute.append(onnx.helper.make_attribute("value", onh.from_array(value)))


def attribute(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def node_label(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node {node.name or '(unnamed)'!r}"


def aligned(offset: int, size: int) -> int:
    """The next offset for a tensor of ``size`` bytes: 16-byte aligned, and from 1 MiB on a 64 KiB boundary
    (any platform's mapping granularity, so runtimes map it instead of reading it; onnx's own largest)."""
    step = 1 << 16 if size >= 1 << 20 else 16
    return offset + (-offset % step)


def point(tensor: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    """Make ``tensor`` a reference to ``length`` bytes at ``offset`` of ``location`` (its value dropped)."""
    name, dims, dtype = tensor.name, list(tensor.dims), tensor.data_type
    tensor.Clear()
    tensor.name, tensor.data_type = name, dtype
    tensor.dims.extend(dims)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def externalise(model: onnx.ModelProto, location: str, names: set[str], source: Path | None) -> DataFile:
    """Point the model at one data file ``location`` holding, in graph order: every tensor still kept in
    the data of the model at ``source`` (carried from there, not read), then the named initializers and
    new ones of EXTERNAL_THRESHOLD bytes or more (now in memory); returns that file's layout."""
    # The same walk in the same order as the model's own: the n-th stored tensor is the n-th located one.
    located = iter(guarded.external_data(model, source) if source is not None else [])
    parts: list[tuple[int, bytes | ExternalTensor]] = []
    end = 0
    initializers = len(model.graph.initializer)  # model_tensors gives them first
    for index, tensor in enumerate(model_tensors(model)):
        content: bytes | ExternalTensor
        if is_external(tensor):
            content = next(located)
            size = content.length
        elif index < initializers:
            content = tensor.raw_data or onh.to_array(tensor).tobytes()
            size = len(content)
            if tensor.name not in names and (size < EXTERNAL_THRESHOLD or not tensor.name.startswith("posexport.")):
                continue
        else:
            continue
        offset = aligned(end, size)
        point(tensor, location, offset, size)
        parts.append((offset, content))
        end = offset + size
    return DataFile(location, parts, end)


def serialise(model: onnx.ModelProto, path: str | Path, external: set[str], source: Path | None = None) -> dict[Path, bytes | DataFile]:
    """The bytes of the model file at ``path`` and, when the source (the model file at ``source``, whose
    external data the model may still reference) kept ``external`` initializers outside, the layout of
    its external data PATH.data: deterministic, ready to be written as one set."""
    path = Path(path)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    files: dict[Path, bytes | DataFile] = {}
    if external:
        data_path = path.with_name(path.name + ".data")
        files[data_path] = externalise(out, data_path.name, external, source)
    return {path: out.SerializeToString(deterministic=True)} | files
