"""The onnxscript side of every build: the posexport opset object, the standard opset of a build, and
the model-local functions a build must carry (found from the onnxscript call graph)."""

from __future__ import annotations

from typing import Any

import onnx
import onnxscript.onnx_opset
from onnxscript.values import Opset

from .contract import DOMAIN, DOMAIN_VERSION, MIN_OPSET
from .errors import PosexportError

POSEXPORT = Opset(DOMAIN, DOMAIN_VERSION)
MSFT = Opset("com.microsoft", 1)


def newest_opset() -> int:
    """The newest opset both onnx and onnxscript know."""
    scripted = max(int(n[len("opset"):]) for n in dir(onnxscript.onnx_opset) if n.startswith("opset") and n[len("opset"):].isdigit())
    return min(onnx.defs.onnx_opset_version(), scripted)


def check_opset(opset: int) -> int:
    newest = newest_opset()
    if not MIN_OPSET <= opset <= newest:
        raise PosexportError(f"--opset {opset}: choose an opset from {MIN_OPSET} to {newest}")
    return opset


def standard_opset(opset: int) -> Any:
    return getattr(onnxscript.onnx_opset, f"opset{opset}")


def callees(function: Any) -> list[Any]:
    """What a function calls: an onnxscript function's call graph, or a node-built entry's own list."""
    own = getattr(function, "callees", None)
    return list(own) if own is not None else list(function.function_ir.get_called_functions().values())


def called_functions(functions: list[Any]) -> list[Any]:
    """The functions listed after the entry point, and every function any of them calls, once each."""
    found: dict[str, Any] = {}
    for function in functions:
        for callee in [function, *callees(function)]:
            found.setdefault(callee.name, callee)
    return [f for name, f in found.items() if name != functions[0].name]


def callees_first(protos: list[onnx.FunctionProto]) -> list[onnx.FunctionProto]:
    """Order functions so each follows those it calls: the reference evaluator resolves them in order."""
    by_key = {(p.domain, p.name): p for p in protos}
    ordered: list[onnx.FunctionProto] = []
    seen: set[tuple[str, str]] = set()

    def visit(proto: onnx.FunctionProto) -> None:
        key = (proto.domain, proto.name)
        if key in seen:
            return
        seen.add(key)
        for node in proto.node:
            callee = by_key.get((node.domain, node.op_type))
            if callee is not None:
                visit(callee)
        ordered.append(proto)

    for proto in protos:
        visit(proto)
    return ordered
