"""``python -m matrix.exporters.run NAME MODEL_DIR OUT_DIR``: run one exporter (in whatever venv this
python is) and print one JSON line, {"onnx": path} or {"failed": reason}. Any error of the exporter is
its failure, reported as its last line; the process itself exits 0 unless the call was malformed."""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from pathlib import Path

from . import EXPORTERS, ExporterFailed


def one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"[:300]


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in EXPORTERS:
        print(f"error: usage: python -m matrix.exporters.run {{{','.join(EXPORTERS)}}} MODEL_DIR OUT_DIR", file=sys.stderr)
        return 2
    name, model, out = argv[0], Path(argv[1]), Path(argv[2])
    module = importlib.import_module(f"{__package__}.{EXPORTERS[name].module}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = {"onnx": str(module.export(model, out))}
    except ExporterFailed as e:
        result = {"failed": str(e)}
    except Exception as e:  # the exporter's own error is the cell's result
        result = {"failed": one_line(e)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
