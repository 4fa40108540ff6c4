"""onnxruntime on the CPU execution provider (graph optimisation on or off); ort_cuda.py reuses the
session with the CUDA provider."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from ..contract import Artifact
from ..dtypes import is_bfloat16, numpy_dtype
from .base import Bound, ModelSession, Runtime, Session, SessionOptions, bfloat16_bits, output_shape


def session_options(optimize: bool, options: SessionOptions, config: Mapping[str, str] | None = None):
    """onnxruntime's session options for a posexport session (graph optimisation on or off, threads,
    spinning, profiling, extra config entries); onnxruntime's own log silenced: failures reach the caller
    as exceptions, and its log would print them twice."""
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    if options.threads:
        so.intra_op_num_threads = options.threads
        so.inter_op_num_threads = 1
    if not options.spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if options.profile:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "posexport_profile")
    for key, value in (config or {}).items():
        so.add_session_config_entry(key, value)
    return so


class OrtSession(Session):
    def __init__(self, artifact: Artifact, providers: list[str], optimize: bool, options: SessionOptions = SessionOptions(),
                 config: Mapping[str, str] | None = None):
        import onnxruntime as ort

        self.ort = ort
        self.artifact = artifact
        self.session = ort.InferenceSession(artifact.model_bytes, session_options(optimize, options, config), providers=providers)
        self.device = "cuda" if providers[0].startswith("CUDA") else "cpu"

    def ort_value(self, array: np.ndarray, device: str = "cpu"):
        """numpy has no bfloat16 that onnxruntime reads directly: pass its bits with the ONNX type
        (on the host: onnxruntime copies them to the device)."""
        if is_bfloat16(array):
            return self.ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bfloat16_bits(array), onnx.TensorProto.BFLOAT16)
        return self.ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), device, 0)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_ortvalue_input(name, self.ort_value(array))
        out_name = self.session.get_outputs()[0].name
        # Bind a numpy buffer as the output so every dtype, bfloat16 included, comes back as numpy.
        out = np.empty(output_shape(self.artifact, feeds), dtype=self.artifact.options.dtype.numpy)
        binding.bind_ortvalue_output(out_name, self.ort_value(out))
        self.session.run_with_iobinding(binding)
        return out

    def bind(self, feeds: Mapping[str, np.ndarray]) -> Bound:
        """I/O binding on the provider's device: inputs bound once, and every output bound to a buffer
        allocated once, so each call writes every output byte and allocates nothing. One first run,
        with outputs allocated by onnxruntime, gives their shapes (no contract needed: bare graphs too)."""
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_ortvalue_input(name, self.ort_value(array, self.device))
        names = [o.name for o in self.session.get_outputs()]
        for name in names:
            binding.bind_output(name, self.device)
        self.session.run_with_iobinding(binding)
        arrays = [np.empty(v.shape(), dtype=numpy_type(v.data_type())) for v in binding.get_outputs()]
        values = [self.ort_value(a, self.device) for a in arrays]
        binding.clear_binding_outputs()
        for name, value in zip(names, values):
            binding.bind_ortvalue_output(name, value)
        # Host buffers are the arrays themselves (bfloat16 always lives on the host); device ones are copied back.
        on_host = [self.device == "cpu" or is_bfloat16(a) for a in arrays]
        return Bound(lambda: self.session.run_with_iobinding(binding),
                     lambda: [a if host else v.numpy() for a, v, host in zip(arrays, values, on_host)])

    def profile(self) -> list[tuple[str, float]]:
        """Share of node time by op type over the runs so far (onnxruntime's profiler), largest five."""
        if not self.session.get_session_options().enable_profiling:
            return []
        path = self.session.end_profiling()
        try:
            events = json.loads(Path(path).read_text())
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        by_op: dict[str, float] = {}
        for e in events:
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                op = e.get("args", {}).get("op_name", "?")
                by_op[op] = by_op.get(op, 0.0) + float(e.get("dur", 0))
        total = sum(by_op.values()) or 1.0
        return sorted(((op, t / total) for op, t in by_op.items()), key=lambda kv: -kv[1])[:5]


class OrtModelSession(OrtSession, ModelSession):
    """A whole model from its path: onnxruntime reads its external data from beside it, by path. It binds
    for timing as a graph's session does (bench --model)."""

    def __init__(self, path: Path, providers: list[str], optimize: bool, options: SessionOptions = SessionOptions(),
                 config: Mapping[str, str] | None = None):
        import onnxruntime as ort

        self.ort = ort
        self.session = ort.InferenceSession(str(path), session_options(optimize, options, config), providers=providers)
        self.device = "cuda" if providers[0].startswith("CUDA") else "cpu"
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.names, self.session.run(self.names, dict(feeds))))


def numpy_type(ort_type: str) -> np.dtype:
    """'tensor(float16)' -> numpy's dtype (bfloat16 through posexport.dtypes, which knows where it lives)."""
    name = ort_type.removeprefix("tensor(").removesuffix(")")
    return numpy_dtype("float32" if name == "float" else "float64" if name == "double" else name)


class OrtCpu(Runtime):
    """onnxruntime, CPU execution provider; ``optimize`` toggles graph optimisation (both are run by
    parity so that a fault that optimisation introduces or hides shows as a difference)."""

    def __init__(self, name: str, optimize: bool):
        self.name = name
        self.optimize = optimize
        self.description = f"onnxruntime CPU, graph optimisation {'on' if optimize else 'off'}"

    def available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("onnxruntime") is None:
            return False, "onnxruntime is not installed (pip install onnxruntime)"
        import onnxruntime as ort

        if "CPUExecutionProvider" not in ort.get_available_providers():
            return False, "this onnxruntime build has no CPUExecutionProvider"
        return True, ""

    def load(self, artifact: Artifact, options: SessionOptions = SessionOptions()) -> OrtSession:
        return OrtSession(artifact, ["CPUExecutionProvider"], self.optimize, options)

    def supports_model(self, path: Path) -> tuple[bool, str]:
        return True, ""

    def load_model(self, path: Path, options: SessionOptions = SessionOptions()) -> OrtModelSession:
        return OrtModelSession(path, ["CPUExecutionProvider"], self.optimize, options)
