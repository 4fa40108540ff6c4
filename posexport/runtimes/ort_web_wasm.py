"""onnxruntime-web's WebAssembly provider (its CPU kernels compiled to WebAssembly, SIMD, threads where the
page is cross-origin isolated), in a headless Chromium (runtimes/ort_web.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .ort_web import OrtWeb


class OrtWebWasm(OrtWeb):
    name = "ort-web-wasm"
    provider = "wasm"
    bundle = "ort.wasm.min.mjs"
    label = "WebAssembly provider"

    def backend(self, info: Mapping[str, Any]) -> str:
        threads = info["threads"]
        return f"WebAssembly provider (SIMD, {threads} thread{'s' if threads != 1 else ''})"
