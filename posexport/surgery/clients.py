"""What an exporter's client reads beside the model, so that a patched model written into a new folder is
one that client loads: optimum's ``ORTModelForCausalLM.from_pretrained`` needs config.json (and
generation_config.json for ``generate``; the tokenizer for pipelines); transformers' ``ExportedModel.
from_pretrained`` reads export.json (each component's file and the metadata traced with it) and the
configs. onnxruntime-genai's folder is genai.py's. The exporter is the one doctor names (exporters.py).

Files are read through posexport.guarded from the source's folder; export.json names the patched file
in place of the source's. A file already at the destination with exactly these bytes (the export.json a
patch of the other generation component wrote there) is left as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx

from .. import guarded
from ..errors import PosexportError
from ..onnxgraph.genai import TOKENIZER_FILES
from ..rope.config import config_block
from .exporters import identify

EXPORT_MANIFEST = "export.json"
CONFIGS = ("config.json", "generation_config.json")
# exporter name (as identify names it, by prefix) -> the files its client reads beside the model
CLIENT_FILES: dict[str, tuple[str, ...]] = {
    "optimum-onnx": (*CONFIGS, *(name for name in TOKENIZER_FILES if name not in CONFIGS)),
    "transformers.exporters": (EXPORT_MANIFEST, *CONFIGS),
}


def client_names(model: onnx.ModelProto, src: Path) -> tuple[str, ...]:
    """The files beside ``src`` its exporter's client reads (present or not)."""
    exporter = identify(model, src).name
    return next((names for prefix, names in CLIENT_FILES.items() if exporter.startswith(prefix)), ())


def manifest_for(data: bytes, src: Path, out: Path) -> bytes:
    """export.json with the source's component file renamed to the patched file's name."""
    try:
        manifest = json.loads(data.decode("utf-8"))
        for entry in manifest["components"].values():
            if entry.get("file") == src.name:
                entry["file"] = out.name
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise PosexportError(f"{src.parent / EXPORT_MANIFEST}: not transformers' export manifest ({e}); remove it or fix it") from None
    return (json.dumps(manifest, indent=2) + "\n").encode()


def client_files(model: onnx.ModelProto, src: Path, out: Path) -> dict[Path, bytes]:
    """The client's files for ``out``'s folder (none when it is the source's own folder)."""
    if out.parent.resolve() == src.parent.resolve():
        return {}
    files = {}
    for name in client_names(model, src):
        if (src.parent / name).exists() or (src.parent / name).is_symlink():
            data = guarded.read_bytes(name, root=src.parent)
            files[out.parent / name] = manifest_for(data, src, out) if name == EXPORT_MANIFEST else data
    return {path: data for path, data in files.items() if not already(path, data)}


def with_rope(data: bytes, values: dict[str, Any], limit: int, where: Path) -> bytes:
    """config.json saying the rope a patch rebuilt (``values``: its parameters) and a max_position_embeddings of at
    least ``limit``, in the spelling of the transformers that saved it: rope_theta and rope_scaling for 4.x (whose
    unread rope_parameters goes), rope_parameters for 5.x."""
    try:
        config = json.loads(data.decode("utf-8"))
        old = int(config.get("max_position_embeddings") or 0)
    except (ValueError, TypeError, AttributeError) as e:
        raise PosexportError(f"{where}: not a model config ({e}); remove it or fix it") from None
    block = config_block(values)
    config["max_position_embeddings"] = max(old, limit)
    if str(config.get("transformers_version", "")).startswith("4."):
        config.pop("rope_parameters", None)
        config |= {"rope_theta": values["base"], "rope_scaling": block or None}
    else:
        config["rope_parameters"] = {"rope_theta": values["base"], "rope_type": "default"} | block
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()


def already(path: Path, data: bytes) -> bool:
    """The destination holds exactly these bytes (a regular file, not a link)."""
    return path.is_file() and not path.is_symlink() and path.stat().st_size == len(data) and path.read_bytes() == data


def client_sources(model: onnx.ModelProto, src: Path) -> list[str]:
    """Names of the client's files present beside ``src``: files the source reads, which no output may be."""
    return [name for name in client_names(model, src) if (src.parent / name).exists() or (src.parent / name).is_symlink()]
