"""The cast-once entry every additive kind builds around its encoding's float32 core function."""

from __future__ import annotations

import itertools
import linecache
from typing import Any

from onnxscript import script

from ...dtypes import DType
from ...script import POSEXPORT


_ENTRY_FILES = itertools.count()


def cast_once_entry(name: str, inputs: list[str], tables: list[str], core: Any, core_args: list[str], io: DType, op: Any,
                    guard: Any = None, add: bool = True) -> Any:
    """posexport.<name>(*inputs, *tables) -> inputs[0] + core(*core_args), the core computing in float32
    (``add`` false: core(*core_args) alone, the inputs being integers).

    float32 I/O adds directly: a Cast to the same type would cost onnxruntime a full copy. Any other I/O
    dtype is Cast to float32 once, added, and Cast back. The entry is written as onnxscript source, so
    its name and its parameter names are the encoding's own (a user lifting it out sees ``Alibi(scores,
    neg_slopes)``, not a generic signature). ``core_args`` may call ``guard`` (posexport.encodings.guards).
    """
    first, called = inputs[0], f"core({', '.join(core_args)})"
    if not add:
        body = called if io.name == "float32" else f"op.Cast({called}, to=out_type)"
    elif io.name == "float32":
        body = f"op.Add({first}, {called})"
    else:
        body = f"op.Cast(op.Add(op.Cast({first}, to=float32), {called}), to=out_type)"
    source = (f"def _make(op, core, guard, float32, out_type):\n"
              f"    def {name}({', '.join(inputs + tables)}):\n"
              f"        return {body}\n"
              f"    return {name}\n")
    # onnxscript reads a function's source through inspect, which finds it in linecache.
    filename = f"<posexport entry {name} {next(_ENTRY_FILES)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"__name__": __name__}
    exec(compile(source, filename, "exec"), namespace)
    return script(POSEXPORT, default_opset=op)(namespace["_make"](op, core, guard, 1, io.onnx))
