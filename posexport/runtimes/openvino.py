"""OpenVINO on the CPU, in float32 (its traps: docs/runtimes.md).

Two traps are handled here rather than hidden:
- OpenVINO's CPU plugin may default to bf16 inference on CPUs that have it: the model is compiled with
  INFERENCE_PRECISION_HINT=f32 and the compiled precision is checked.
- OpenVINO ignores ``rotary_embedding_dim`` on onnxruntime's com.microsoft.RotaryEmbedding and rotates
  the whole head (wrong output, no error): such graphs are reported unsupported unless the caller asks
  to run them anyway (to show the failure).
And two are stated where they apply: its Gather returns zeros for an out-of-range index instead of
raising (a known limitation of the ``raises-past-limit`` property), and its CPU plugin runs float64
arithmetic in float32 (a caveat on graphs that compute in float64, which then fail at large positions).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnx.inliner

from ..contract import Artifact
from ..dtypes import is_bfloat16
from ..encodings.properties import RAISES_PAST_LIMIT
from .base import Bound, ModelSession, Runtime, Session, SessionOptions, all_nodes, bfloat16_bits

GATHER_OUT_OF_RANGE = (
    "OpenVINO's Gather returns zeros for an out-of-range index instead of raising, so positions past the "
    "graph's limit give zero rows, silently"
)


def partial_contrib_rotary(model: onnx.ModelProto) -> str | None:
    """Why a com.microsoft.RotaryEmbedding node would rotate the wrong channels on OpenVINO, or None."""
    nodes = [n for n in all_nodes(model) if n.domain == "com.microsoft" and n.op_type == "RotaryEmbedding"]
    if not nodes:
        return None
    shapes = {}
    inferred = onnx.shape_inference.infer_shapes(model)
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]
    for node in nodes:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        rotary = attrs.get("rotary_embedding_dim", 0)
        if not rotary:
            continue
        shape = shapes.get(node.input[0], [])
        head = None
        if len(shape) == 4:
            head = shape[3]
        elif len(shape) == 3 and shape[2] and attrs.get("num_heads"):
            head = shape[2] // attrs["num_heads"]
        if head is None or rotary < head:
            return (
                f"node {node.name or node.output[0]!r}: com.microsoft.RotaryEmbedding with rotary_embedding_dim="
                f"{rotary} < head size {head if head is not None else '(unknown)'}; OpenVINO ignores that attribute "
                "and rotates the whole head (wrong output, no error)"
            )
    return None


class OpenVinoSession(Session):
    def __init__(self, artifact: Artifact, options: SessionOptions):
        import openvino as ov

        self.ov = ov
        self.dtype = artifact.options.dtype
        # OpenVINO's ONNX frontend does not take model-local functions reliably: inline them first.
        model = onnx.inliner.inline_local_functions(artifact.model)
        core = ov.Core()
        self.compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU", float32_config(options))
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        if str(precision) not in ("<Type: 'float32'>", "f32", "float32"):
            raise RuntimeError(f"OpenVINO compiled in {precision}, not float32, despite INFERENCE_PRECISION_HINT=f32")
        self.request = self.compiled.create_infer_request()

    def tensor(self, array: np.ndarray):
        """OpenVINO takes bfloat16 as its bits with its own bf16 type."""
        if is_bfloat16(array):
            return self.ov.Tensor(bfloat16_bits(array), array.shape, self.ov.Type.bf16)
        return self.ov.Tensor(np.ascontiguousarray(array))

    def output(self) -> np.ndarray:
        out = self.request.get_output_tensor(0)
        data = np.array(out.data, copy=True)
        if self.dtype.name == "bfloat16":
            return data.view(np.uint16).view(self.dtype.numpy).reshape(tuple(out.shape))
        return data.astype(self.dtype.numpy, copy=False)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        self.request.infer({name: self.tensor(array) for name, array in feeds.items()})
        return self.output()

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Bound:
        """Input tensors set on the infer request once; each call infers on them."""
        for name, array in feeds.items():
            self.request.set_tensor(name, self.tensor(array))
        return Bound(self.request.infer, lambda: [self.output()])


class OpenVinoModelSession(ModelSession):
    """A whole model from its path (OpenVINO reads external data by path), compiled in float32."""

    def __init__(self, path: Path, options: SessionOptions):
        import openvino as ov

        core = ov.Core()
        self.compiled = core.compile_model(core.read_model(str(path)), "CPU", float32_config(options))
        self.request = self.compiled.create_infer_request()
        self.names = [next(iter(o.get_names()), f"output{i}") for i, o in enumerate(self.compiled.outputs)]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        result = self.request.infer({name: np.ascontiguousarray(a) for name, a in feeds.items()})
        return {name: np.array(result[out], copy=True) for name, out in zip(self.names, self.compiled.outputs)}


def float32_config(options: SessionOptions) -> dict[str, object]:
    """f32 inference precision (the CPU plugin defaults to bf16 where the CPU has it), and the threads."""
    config: dict[str, object] = {"INFERENCE_PRECISION_HINT": "f32"}
    if options.threads:
        config["INFERENCE_NUM_THREADS"] = options.threads
    return config


class OpenVino(Runtime):
    """``run_partial_contrib_rotary`` runs graphs known to come out wrong (to show that parity fails)."""

    name = "openvino"

    def __init__(self, run_partial_contrib_rotary: bool = False):
        self.run_partial_contrib_rotary = run_partial_contrib_rotary
        self.description = f"OpenVINO CPU plugin, INFERENCE_PRECISION_HINT=f32, local functions inlined; known limitation: {GATHER_OUT_OF_RANGE}"
        self.limitations: dict[str, str] = {RAISES_PAST_LIMIT: GATHER_OUT_OF_RANGE}

    def available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("openvino") is None:
            return False, "openvino is not installed (pip install 'posexport[openvino]')"
        import openvino as ov

        devices = ov.Core().available_devices
        if "CPU" not in devices:
            return False, f"OpenVINO has no CPU device here (devices: {', '.join(devices) or 'none'})"
        return True, ""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        if not self.run_partial_contrib_rotary:
            why = partial_contrib_rotary(onnx.inliner.inline_local_functions(artifact.model))
            if why:
                return False, why
        return True, ""

    def caveats(self, artifact: Artifact) -> str:
        model = onnx.inliner.inline_local_functions(artifact.model)
        double = onnx.TensorProto.DOUBLE
        casts = sum(
            1 for n in all_nodes(model)
            if n.op_type == "Cast" and any(a.name == "to" and a.i == double for a in n.attribute)
        )
        tables = sum(1 for t in model.graph.initializer if t.data_type == double)
        if casts or tables:
            return (
                f"this graph computes in float64 ({casts} casts to float64, {tables} float64 initializers); "
                "OpenVINO's CPU plugin runs float64 arithmetic in float32, so angles formed in float64 lose "
                "precision at large positions"
            )
        return ""

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> OpenVinoSession:
        return OpenVinoSession(artifact, options)

    def supports_model(self, path: Path) -> tuple[bool, str]:
        return True, ""

    def load_model(self, path: Path, options: SessionOptions = SessionOptions()) -> OpenVinoModelSession:
        return OpenVinoModelSession(path, options)
