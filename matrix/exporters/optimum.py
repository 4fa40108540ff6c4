"""optimum-onnx's `optimum-cli export onnx --task text-generation-with-past` (TorchScript), in .venvs/optimum
with transformers 4.57. That version ignores transformers 5's `rope_parameters`, so the model is handed
over with its config in 4.x spelling (config.4x.json, written beside config.json by matrix.models)."""

from __future__ import annotations

import shutil
from pathlib import Path

from .tool import only_onnx, run_tool, script


def export(model: Path, out: Path) -> Path:
    source = out.with_name(out.name + "-source")
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(model, source)
    shutil.copyfile(model / "config.4x.json", source / "config.json")
    run_tool([script("optimum-cli"), "export", "onnx", "--model", str(source), "--task", "text-generation-with-past", str(out)])
    return only_onnx(out)
