"""An exported model as surgery sees it: nodes with their producers and consumers, initializers as
numpy arrays, and a deterministic writer that keeps external data external, beside the output."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper as onh
from google.protobuf.message import DecodeError

from ..errors import PosexportError

# Tensors at least this large go to the external data file when the source model used one.
EXTERNAL_THRESHOLD = 1024


def load(path: str | Path) -> onnx.ModelProto:
    """The model with its external data read in (the tensors' data, not their locations, are kept)."""
    path = Path(path)
    if not path.is_file():
        raise PosexportError(f"{path}: no such model file")
    try:
        return onnx.load(str(path), load_external_data=True)
    except (OSError, ValueError, DecodeError, onnx.checker.ValidationError) as e:  # the last: external data missing
        raise PosexportError(f"{path}: cannot read it as an ONNX model ({e})") from None


def external_names(path: str | Path) -> set[str]:
    """Initializers the model file keeps in external data."""
    head = onnx.load(str(path), load_external_data=False)
    return {t.name for t in head.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}


@dataclass
class Graph:
    """Index of a model's main graph: who produces and who consumes each tensor."""

    model: onnx.ModelProto
    producer: dict[str, onnx.NodeProto] = field(default_factory=dict)
    consumers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    initializers: dict[str, onnx.TensorProto] = field(default_factory=dict)

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

    @property
    def outputs(self) -> set[str]:
        return {o.name for o in self.model.graph.output}

    def array(self, name: str) -> np.ndarray | None:
        """The value of an initializer or a Constant node's output, else None."""
        if name in self.initializers:
            return onh.to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.name == "value":
                    return onh.to_array(a.t)
                if a.name in ("value_float", "value_int", "value_floats", "value_ints"):
                    return np.array(onnx.helper.get_attribute_value(a))
        return None

    def consumers_of(self, name: str, op_type: str) -> list[onnx.NodeProto]:
        return [n for n in self.consumers.get(name, []) if n.op_type == op_type]

    def opset(self) -> int:
        return next(o.version for o in self.model.opset_import if o.domain in ("", "ai.onnx"))


def attribute(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def node_label(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node {node.name or '(unnamed)'!r}"


def externalise(model: onnx.ModelProto, location: str, names: set[str]) -> bytes:
    """Move the named initializers, and new ones of EXTERNAL_THRESHOLD bytes or more, into one blob
    (in graph order, 16-byte aligned) and point the model at ``location``; returns the blob."""
    blob = bytearray()
    for tensor in model.graph.initializer:
        raw = onh.to_array(tensor).tobytes() if not tensor.raw_data else tensor.raw_data
        if tensor.name not in names and (len(raw) < EXTERNAL_THRESHOLD or not tensor.name.startswith("posexport.")):
            continue
        blob.extend(b"\0" * (-len(blob) % 16))
        offset = len(blob)
        blob.extend(raw)
        name, dims, dtype = tensor.name, list(tensor.dims), tensor.data_type
        tensor.Clear()
        tensor.name, tensor.data_type = name, dtype
        tensor.dims.extend(dims)
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", str(offset)), ("length", str(len(raw)))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return bytes(blob)


def serialise(model: onnx.ModelProto, path: str | Path, external: set[str]) -> dict[Path, bytes]:
    """The bytes of the model file at ``path`` and, when the source kept ``external`` initializers outside,
    of its external data PATH.data: deterministic, ready to be written as one set."""
    path = Path(path)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    files = {}
    if external:
        data_path = path.with_name(path.name + ".data")
        files[data_path] = externalise(out, data_path.name, external)
    return {path: out.SerializeToString(deterministic=True)} | files
