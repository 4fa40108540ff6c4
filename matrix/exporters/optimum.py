"""optimum-onnx's `optimum-cli export onnx --task text-generation-with-past` (TorchScript), run by the python
of .venvs/optimum (transformers 4.57; tests/exporters.optimum). That version ignores transformers 5's
`rope_parameters`, so the model is handed over with its config in 4.x spelling (config.4x.json, written
beside config.json by matrix.models): the export is of the model the user has."""

from __future__ import annotations

import shutil
from pathlib import Path

from zoo import exporters


def export(model: Path, out: Path) -> Path:
    source = out.with_name(out.name + "-source")
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(model, source)
    shutil.copyfile(model / "config.4x.json", source / "config.json")
    return exporters.optimum(source, out)
