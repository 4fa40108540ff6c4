"""Which exporter wrote a model, from what it leaves behind: the producer fields, the metadata, and the
files beside the model (onnxruntime-genai's genai_config.json, transformers' export.json, a config.json
saved by the transformers that read the model). One small function per exporter in IDENTIFIERS, tried in
order; the first that recognises the model names it, with the evidence it used."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

FUSED_DOMAIN = "com.microsoft"


@dataclass
class Exporter:
    name: str
    version: str | None = None
    transformers: str | None = None  # the transformers version that read the model's config when exporting
    evidence: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "transformers": self.transformers, "evidence": self.evidence}


def beside(path: Path | None, name: str) -> dict[str, Any] | None:
    """A JSON file next to the model, or None (absent or unreadable: not evidence)."""
    if path is None or not (path.parent / name).is_file():
        return None
    try:
        value = json.loads((path.parent / name).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def fused(model: onnx.ModelProto) -> bool:
    return any(n.domain == FUSED_DOMAIN for n in model.graph.node)


def genai(model: onnx.ModelProto, path: Path | None) -> Exporter | None:
    config = beside(path, "genai_config.json")
    if config is None:
        return None
    version = model.producer_version if model.producer_name == "onnxruntime-genai" else None
    int4 = any(n.op_type == "MatMulNBits" for n in model.graph.node)
    return Exporter("onnxruntime-genai", version, None, ["genai_config.json beside the model"] + (["MatMulNBits weights (int4)"] if int4 else []))


def transformers_exporter(model: onnx.ModelProto, path: Path | None) -> Exporter | None:
    manifest = beside(path, "export.json")
    if manifest is None or not isinstance(manifest.get("components"), dict):
        return None
    components = {k: v for k, v in manifest["components"].items() if isinstance(v, dict)}
    # export_for_generation writes one file per stage (prefill.onnx, decode.onnx): this file's entry
    own = next((k for k, v in components.items() if v.get("file") == path.name), next(iter(components), None))
    metadata = components[own].get("metadata", {}) if own is not None else {}
    version = metadata.get("packages", {}).get("transformers")
    fusions = metadata.get("export_config", {}).get("ort_fusions")
    name = "transformers.exporters (OnnxExporter)" + (f", ort_fusions={fusions}" if fusions else "")
    stage = f", component {own!r} of {', '.join(components)}" if len(components) > 1 else ""
    return Exporter(name, version, version, [f"export.json beside the model (schema_version {manifest.get('schema_version')}){stage}"])


def torchscript_style(model: onnx.ModelProto) -> bool:
    """TorchScript exports name nodes after module scopes (/model/layers.0/…); dynamo names them node_…."""
    names = [n.name for n in model.graph.node if n.name]
    return bool(names) and sum(n.startswith("/") for n in names) > len(names) // 2


def optimum(model: onnx.ModelProto, path: Path | None) -> Exporter | None:
    config = beside(path, "config.json")
    if config is None or model.producer_name != "pytorch" or not torchscript_style(model):
        return None
    if any(path.parent.glob("*.safetensors")) or any(path.parent.glob("pytorch_model*.bin")):
        return None  # a TorchScript export saved into the model's own folder, not optimum's output folder
    read_by = config.get("transformers_version")
    return Exporter("optimum-onnx (TorchScript)", None, read_by,
                    [f"a TorchScript export beside a config.json saved by transformers {read_by}, without the model's weights"])


def torch_onnx(model: onnx.ModelProto, path: Path | None) -> Exporter | None:
    if model.producer_name != "pytorch":
        return None
    form = "TorchScript" if torchscript_style(model) else "dynamo"
    extra = ", onnxruntime fusions (onnxscript optimize_for_ort)" if fused(model) else ""
    return Exporter(f"torch.onnx ({form}){extra}", model.producer_version, None,
                    [f"producer {model.producer_name} {model.producer_version}, node names in the {form} style"])


def mobius(model: onnx.ModelProto, path: Path | None) -> Exporter | None:
    if model.producer_name != "mobius":
        return None
    return Exporter("mobius-onnx", model.producer_version or None, None, [f"producer mobius {model.producer_version}".rstrip()])


IDENTIFIERS: list[Callable[[onnx.ModelProto, Path | None], Exporter | None]] = [genai, transformers_exporter, optimum, mobius, torch_onnx]


def identify(model: onnx.ModelProto, path: Path | None = None) -> Exporter:
    """The exporter that wrote ``model`` (read from ``path``), or "unknown" with its producer fields."""
    for identifier in IDENTIFIERS:
        found = identifier(model, path)
        if found is not None:
            return found
    producer = f"{model.producer_name} {model.producer_version}".strip()
    return Exporter("unknown", None, None, [f"producer {producer!r}" if producer else "no producer recorded"])
