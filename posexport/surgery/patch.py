"""``posexport patch``: each site replaced by posexport's exact maths, nothing else changed. Every site is
checked before anything is rewritten, so an unsafe or ambiguous site leaves no output at all."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from .. import params as params_mod
from ..errors import PosexportError
from ..files import Content, check_destination, write_files
from ..rope.encoding import RopeParams
from .find import KINDS, find_in
from .graph import Graph, load, serialise
from .rope_cache import CacheKind
from .sites import Site
from .source import Candidates, choose

GENAI_CONFIG = "genai_config.json"


@dataclass
class Patched:
    """What a patch did: the model, and per site the parameters it used."""

    model: onnx.ModelProto
    sites: list[tuple[Site, RopeParams]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        return [{"site": s.anchor, "kind": s.kind, "params": params_mod.to_dict(p)} for s, p in self.sites]


def plan(graph: Graph, values: dict[str, Any] | Candidates | None, position_limit: int | None) -> list[tuple[Site, RopeParams]]:
    """Every patchable site with its checked parameters; any doubt is an error naming the node."""
    chosen, left = [], []
    for site in find_in(graph):
        kind = KINDS[site.kind]
        if not kind.patchable:
            left.append(f"{site.anchor} ({site.kind})")
            continue
        if "rotary_dim" not in site.recovered:
            kind.check(graph, site, None)  # nothing recovered to patch with: raises, naming the node
        chosen.append((site, choose(site, values, position_limit, lambda p, k=kind, s=site: k.check(graph, s, p))))
    if not chosen:
        found = f"; found only {', '.join(left)}" if left else ""
        raise PosexportError(f"no positional-encoding site posexport can patch{found} (see `posexport doctor`)")
    return chosen


def patch(model: onnx.ModelProto | str | Path, values: dict[str, Any] | Candidates | None = None,
          position_limit: int | None = None) -> Patched:
    """Patch a model (a ModelProto, which is not changed, or a path, whose external data is read only
    where a site needs it and stays referenced, not loaded): the patched copy and what was used.
    ``values`` are rope options (as ``requested_values`` gives them); None: each site's recognised rope."""
    source = Path(model) if isinstance(model, (str, Path)) else None
    copy = onnx.ModelProto()
    copy.CopyFrom(load(source) if source is not None else model)
    return rewritten(Graph(copy, source), values, position_limit)


def rewritten(graph: Graph, values: dict[str, Any] | Candidates | None, position_limit: int | None) -> Patched:
    """Rewrite every site of ``graph`` in place (checked first) and check the result as the source was."""
    passed = passes_checker(graph.model)  # some exporters' models (contrib ops in the default domain) never pass it
    chosen = plan(graph, values, position_limit)
    for site, p in chosen:
        KINDS[site.kind].rewrite(graph, site, p)
    if passed:
        onnx.checker.check_model(weightless(graph.model))
    return Patched(graph.model, chosen)


def weightless(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with each initializer kept in external data turned into a graph input of its type and
    shape: what the checker and shape inference look at, without reading or serialising the weights."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    inputs = {i.name for i in g.input}
    stored = [t for t in g.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    for tensor in stored:
        if tensor.name not in inputs:
            g.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
        g.initializer.remove(tensor)
    return copy


def passes_checker(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(weightless(model))
    except onnx.checker.ValidationError:
        return False
    return True


def apart(src: Path, out: Path, graph: Graph) -> None:
    """Refuse an output that is one of the files the patch reads (the model or its data, by any name)."""
    if out.resolve() == src.resolve():
        raise PosexportError(f"--out {out}: choose a path other than the model being patched")
    read = [src, *sorted({t.path for t in graph.stored.values()})]
    for written in (out, out.with_name(out.name + ".data")):
        clash = next((r for r in read if written.exists() and os.path.samefile(written, r)), None)
        if clash is not None:
            raise PosexportError(f"--out {out}: writing {written} would replace {clash}, which the model being patched "
                                 "reads; choose another name or folder")


def patch_file(src: str | Path, out: str | Path, values: dict[str, Any] | Candidates | None = None,
               position_limit: int | None = None) -> Patched:
    """Patch the model at ``src`` into ``out`` (external data beside it when the source had some); for
    an onnxruntime-genai folder also write genai_config.json with the new context length. Only the
    tensors a site reads are loaded; every other stored tensor is carried into the new data file."""
    src, out = Path(src), Path(out)
    graph = Graph(load(src), src)
    apart(src, out, graph)
    check_destination(out, "--out")
    done = rewritten(graph, values, position_limit)
    files: dict[Path, Content] = serialise(done.model, out, set(graph.stored), graph.stored)
    if (src.parent / GENAI_CONFIG).is_file():
        files |= genai_folder(src, out, done)
    # The model, its data and the folder's files are written as one set: all of them, or none.
    done.files = write_files(files, "--out", stem=out.stem)
    return done


def genai_folder(src: Path, out: Path, done: Patched) -> dict[Path, bytes]:
    """genai_config.json beside the output (decoder file name and context length updated) and, in a new
    folder, the folder's other small files (tokenizer, processing config)."""
    config = json.loads((src.parent / GENAI_CONFIG).read_text())
    limits = [p.position_limit for s, p in done.sites if s.kind == CacheKind.name]
    model_cfg = config.get("model", {})
    old = model_cfg.get("context_length")
    if limits:
        model_cfg["context_length"] = min(limits)
        search = config.get("search", {})
        if search.get("max_length") == old:
            search["max_length"] = min(limits)
    model_cfg.get("decoder", {})["filename"] = out.name
    files = {out.parent / GENAI_CONFIG: (json.dumps(config, indent=4) + "\n").encode()}
    if out.parent.resolve() != src.parent.resolve():
        for extra in sorted(src.parent.iterdir()):
            if extra.is_file() and extra.name != GENAI_CONFIG and not extra.name.startswith((src.name, ".")):
                files[out.parent / extra.name] = extra.read_bytes()
    return files
