"""The cast-once entry every additive kind builds around its encoding's float32 core function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx.helper as oh

from ...contract import DOMAIN, DOMAIN_VERSION
from ...dtypes import DType


@dataclass
class EntryFunction:
    """A model-local function written node by node (its name and parameter names are the encoding's
    own), calling onnxscript functions: ``callees`` are what it calls, for the build to carry."""

    name: str
    proto: onnx.FunctionProto
    callees: list[Any] = field(default_factory=list)

    def to_function_proto(self) -> onnx.FunctionProto:
        return self.proto


def call(function: Any, inputs: list[str], output: str) -> onnx.NodeProto:
    return oh.make_node(function.name, inputs, [output], domain=DOMAIN, name=function.name)


def cast_once_entry(name: str, inputs: list[str], tables: list[str], core: Any, core_args: list[str], io: DType, op: Any,
                    guard: Any = None, add: bool = True) -> EntryFunction:
    """posexport.<name>(*inputs, *tables) -> inputs[0] + core(*core_args), the core computing in float32
    (``add`` false: core(*core_args) alone, the inputs being integers).

    float32 I/O adds directly: a Cast to the same type would cost onnxruntime a full copy. Any other I/O
    dtype is Cast to float32 once, added, and Cast back. The entry's name and parameter names are the
    encoding's own (a user lifting it out sees ``Alibi(scores, neg_slopes)``, not a generic signature).
    With ``guard`` (posexport.encodings.guards) the core reads ``guard(*inputs)`` in place of ``inputs[1]``.
    """
    nodes: list[onnx.NodeProto] = []
    args = list(core_args)
    if guard is not None:
        nodes.append(call(guard, inputs, "checked"))
        args = ["checked" if a == inputs[1] else a for a in args]
    nodes.append(call(core, args, "core"))
    float32 = io.name == "float32"
    if add and float32:
        nodes.append(oh.make_node("Add", [inputs[0], "core"], ["sum"]))
    elif add:
        nodes += [oh.make_node("Cast", [inputs[0]], ["first32"], to=onnx.TensorProto.FLOAT),
                  oh.make_node("Add", ["first32", "core"], ["sum"])]
    if not float32:
        nodes.append(oh.make_node("Cast", [nodes[-1].output[0]], ["out"], to=io.onnx))
    nodes[-1].output[0] = "y"
    opsets = [oh.make_opsetid("", op.version), oh.make_opsetid(DOMAIN, DOMAIN_VERSION)]
    proto = oh.make_function(DOMAIN, name, inputs + tables, ["y"], nodes, opsets)
    return EntryFunction(name, proto, [core, *([guard] if guard is not None else [])])
