"""onnxruntime on the CPU execution provider."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

import numpy as np
import onnx

from ..contract import Artifact
from .base import output_shape


class OrtSession:
    def __init__(self, artifact: Artifact, providers: list[str], optimize: bool, threads: int = 0, config: Mapping[str, str] | None = None):
        import onnxruntime as ort

        self.ort = ort
        # Failures reach the caller as exceptions; onnxruntime's own log would print them twice.
        ort.set_default_logger_severity(4)
        self.artifact = artifact
        options = ort.SessionOptions()
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
        options.log_severity_level = 4
        if threads:
            options.intra_op_num_threads = threads
        for key, value in (config or {}).items():
            options.add_session_config_entry(key, value)
        self.session = ort.InferenceSession(artifact.model_bytes, options, providers=providers)
        self.device = "cuda" if providers[0].startswith("CUDA") else "cpu"

    def ort_value(self, array: np.ndarray):
        """numpy has no bfloat16 that onnxruntime reads directly: pass its bits with the ONNX type."""
        if array.dtype.name == "bfloat16":
            # The bits of a strided view would be read as if contiguous: copy first.
            bits = np.ascontiguousarray(array).view(np.uint16)
            return self.ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx.TensorProto.BFLOAT16)
        return self.ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_ortvalue_input(name, self.ort_value(array))
        out_name = self.session.get_outputs()[0].name
        dtype = self.artifact.options.dtype.numpy
        # Bind a numpy buffer as the output so every dtype, bfloat16 included, comes back as numpy.
        out = np.empty(output_shape(self.artifact, feeds), dtype=dtype)
        binding.bind_ortvalue_output(out_name, self.ort_value(out))
        self.session.run_with_iobinding(binding)
        return out


class OrtCpu:
    """onnxruntime, CPU execution provider; ``optimize`` toggles graph optimisation (DESIGN 6)."""

    def __init__(self, name: str, optimize: bool):
        self.name = name
        self.optimize = optimize
        self.description = f"onnxruntime CPU, graph optimisation {'on' if optimize else 'off'}"
        self.limitations: dict[str, str] = {}

    def available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("onnxruntime") is None:
            return False, "onnxruntime is not installed (pip install onnxruntime)"
        import onnxruntime as ort

        if "CPUExecutionProvider" not in ort.get_available_providers():
            return False, "this onnxruntime build has no CPUExecutionProvider"
        return True, ""

    def supports(self, artifact: Artifact) -> tuple[bool, str]:
        return True, ""

    def caveats(self, artifact: Artifact) -> str:
        return ""

    def load(self, artifact: Artifact) -> OrtSession:
        return OrtSession(artifact, ["CPUExecutionProvider"], self.optimize)
