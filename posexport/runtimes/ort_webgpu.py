"""onnxruntime-web's WebGPU provider, in a headless Chromium (runtimes/ort_web.py). The adapter is the
browser's own choice: a GPU where Chromium has one, else SwiftShader (WebGPU on the CPU, whose timings say
nothing of a GPU's). Nodes the provider has no kernel for run on onnxruntime-web's CPU provider; the
report says which."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..encodings.properties import RAISES_PAST_LIMIT
from .ort_web import OrtWeb

GATHER_OUT_OF_RANGE = (
    "onnxruntime-web's WebGPU Gather does not check its indices: an out-of-range one reads the last element of the "
    "table (WebGPU clamps the read) instead of raising, so positions past the graph's limit give wrong rows, "
    "silently (docs/web-repros/gather-out-of-range.onnx)"
)


class OrtWebGpu(OrtWeb):
    name = "ort-webgpu"
    provider = "webgpu"
    bundle = "ort.webgpu.min.mjs"
    label = "WebGPU provider"
    limitations = {RAISES_PAST_LIMIT: GATHER_OUT_OF_RANGE}

    def usable(self, info: Mapping[str, Any]) -> tuple[bool, str]:
        if info["adapter"]:
            return True, ""
        where = "navigator.gpu.requestAdapter() gave none" if info["gpu"] else "the browser has no navigator.gpu"
        return False, f"no WebGPU adapter: {where} ({info['agent']})"

    def float16_ok(self) -> tuple[bool, str]:
        adapter = self.info().get("adapter")
        if adapter and not adapter["f16"]:
            return False, (f"the WebGPU adapter ({adapter['vendor']} {adapter['architecture']}) has no shader-f16, and "
                           "onnxruntime-web's WebGPU kernels need it for float16 tensors")
        return True, ""

    def backend(self, info: Mapping[str, Any]) -> str:
        adapter = info["adapter"]
        if not adapter:
            return "WebGPU provider, no adapter"
        named = " ".join(part for part in (adapter["vendor"], adapter["architecture"], adapter["device"]) if part) or "unnamed"
        traits = ["shader-f16" if adapter["f16"] else "no shader-f16"]
        if adapter["architecture"] == "swiftshader" or adapter["fallback"]:
            traits.insert(0, "SwiftShader, WebGPU on the CPU: its timings say nothing of a GPU's")
        return f"WebGPU provider on adapter {named} ({'; '.join(traits)})"
