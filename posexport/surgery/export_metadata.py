"""transformers' export metadata, checked against the graph and the model's config. transformers 5's exporters record
what they traced with each component: in the ONNX file's metadata_props (``transformers_export_metadata``) where
they put it there, else in export.json beside the model (the component whose file is this one), as
``transformers.exporters.metadata.ExportMetadata`` spells it: the architecture, the precision (``export_dtype``)
and every traced input's rank, shape and dtype, past key/values per layer. A disagreement is a fault with its numbers:
a client that trusts the metadata (``ExportedModel.from_pretrained`` feeds inputs as traced) would feed this graph
wrongly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx

from .. import guarded
from ..errors import PosexportError
from .clients import EXPORT_MANIFEST
from .lengths import PAST_INPUT
from .sites import Fault

METADATA_KEY = "transformers_export_metadata"
DTYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16",
          onnx.TensorProto.DOUBLE: "float64", onnx.TensorProto.INT64: "int64", onnx.TensorProto.INT32: "int32",
          onnx.TensorProto.BOOL: "bool"}


def read_metadata(model: onnx.ModelProto, path: Path | None) -> tuple[dict[str, Any], str] | None:
    """(the metadata, where it was read) for this model file, or None when its exporter recorded none."""
    own = next((p.value for p in model.metadata_props if p.key == METADATA_KEY), None)
    if own is not None:
        where = f"its metadata_props {METADATA_KEY!r}"
        try:
            return as_dict(json.loads(own), where), where
        except ValueError as e:
            raise PosexportError(f"{where}: not JSON ({e}); remove it or fix it") from None
    if path is None or not (path.parent / EXPORT_MANIFEST).is_file():
        return None
    manifest = guarded.read_json(EXPORT_MANIFEST, root=path.parent)
    components = manifest.get("components") if isinstance(manifest, dict) else None
    entry = next((v for v in (components or {}).values() if isinstance(v, dict) and v.get("file") == path.name), None)
    if entry is None:
        return None
    return as_dict(entry.get("metadata"), str(path.parent / EXPORT_MANIFEST)), f"{EXPORT_MANIFEST} beside the model"


def as_dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PosexportError(f"{where}: transformers' export metadata is not an object; remove it or fix it")
    return value


def shape_of(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]


def traced_input_faults(traced: dict[str, Any], graph: onnx.GraphProto) -> list[Fault]:
    """Each traced input the graph takes by name: the same rank and dtype, and every axis the graph fixes the size
    it was traced with; and as many past key/values traced as the graph takes."""
    inputs, faults = {v.name: v for v in graph.input}, []
    for name, leaf in traced.items():
        value = inputs.get(name)
        if value is None or not isinstance(leaf, dict) or "shape" not in leaf:
            continue
        shape, dtype = shape_of(value), DTYPES.get(value.type.tensor_type.elem_type, "?")
        fixed = [(axis, size, got) for axis, (size, got) in enumerate(zip(shape, leaf["shape"])) if isinstance(size, int) and size != got]
        if len(shape) != leaf.get("rank", len(leaf["shape"])) or dtype != leaf.get("dtype", dtype) or fixed:
            where = f", axis {fixed[0][0]} {fixed[0][2]} traced where the graph fixes {fixed[0][1]}" if fixed else ""
            faults.append(Fault("export-metadata-mismatch", f"input {name!r}: traced as {leaf.get('dtype')} {leaf['shape']}, the graph "
                                f"takes {dtype} {shape}{where}", float(fixed[0][2] if fixed else len(shape))))
    past = [leaf for leaf in traced.values() if isinstance(leaf, dict) and "leaves" in leaf]
    traced_past = sum(len(p["leaves"]) for p in past)
    graph_past = sum(1 for v in graph.input if PAST_INPUT.search(v.name))
    if past and traced_past != graph_past:
        faults.append(Fault("export-metadata-mismatch", f"{traced_past} past key/value tensors traced, the graph takes {graph_past}",
                            float(traced_past)))
    return faults


def config_faults(metadata: dict[str, Any], graph: onnx.GraphProto, config: dict[str, Any]) -> list[Fault]:
    """The traced architecture is the config's, and the graph returns a key and a value cache for each of its layers."""
    faults = []
    architectures = config.get("architectures") or []
    if metadata.get("architecture") and architectures and metadata["architecture"] not in architectures:
        faults.append(Fault("export-metadata-mismatch", f"traced {metadata['architecture']}, the config says {', '.join(architectures)}"))
    layers = config.get("num_hidden_layers")
    caches = sum(1 for v in graph.output if PAST_INPUT.search(v.name) or v.name.startswith("present"))
    if isinstance(layers, int) and caches and caches != 2 * layers:
        faults.append(Fault("export-metadata-mismatch", f"the graph returns {caches} key/value caches, the config's "
                            f"{layers} layers {2 * layers}", float(caches)))
    return faults


def check_export_metadata(model: onnx.ModelProto, path: Path | None, config: dict[str, Any]) -> dict[str, Any] | None:
    """The doctor's entry: where the metadata was read, what it says, and its faults (None when there is none)."""
    found = read_metadata(model, path)
    if found is None:
        return None
    metadata, where = found
    faults = traced_input_faults(metadata.get("kwargs") or {}, model.graph) + config_faults(metadata, model.graph, config)
    outputs = [o for o in model.graph.output if o.name == "logits"] or list(model.graph.output[:1])
    logits = DTYPES.get(outputs[0].type.tensor_type.elem_type) if outputs else None
    if metadata.get("export_dtype") and logits and metadata["export_dtype"] != logits:
        faults.append(Fault("export-metadata-mismatch", f"export_dtype {metadata['export_dtype']}, the graph's "
                            f"{outputs[0].name} {logits}"))
    said = {"architecture": metadata.get("architecture"), "export_dtype": metadata.get("export_dtype"),
            "traced": {k: v.get("shape", "…") for k, v in (metadata.get("kwargs") or {}).items() if isinstance(v, dict)}}
    return {"from": where, "says": said, "faults": [f.as_dict() for f in faults]}
