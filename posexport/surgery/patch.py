"""``posexport patch``: each site replaced by posexport's exact maths, nothing else changed. Every site is
checked before anything is rewritten, so an unsafe or ambiguous site leaves no output at all."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from .. import guarded, params as params_mod
from ..contract import SCHEMA_VERSION
from ..errors import PosexportError
from ..files import Content, check_destination, reading_destinations, write_files
from ..onnxgraph.genai import GENAI_CONFIG, TOKENIZER_FILES, companions, named_files, read_config
from ..onnxgraph.graph import Graph, load, serialise
from ..rope.encoding import RopeParams
from .clients import CLIENT_FILES, client_files, client_sources, with_rope
from .find import KINDS, find_in
from .learned_table import Extension
from .lengths import check_followers, old_limit
from .rope_cache import CacheKind
from .sites import LEFT, Request, Site
from .source import Candidates, Unrecognised, default_source

# What a patched site computes from, shown even at their defaults; any other field only where it is not
# the default (heads, layout or max_positions at their defaults were never read from the graph).
SHOWN = ("head_dim", "rotary_dim", "base", "scaling", "position_limit")
PATCHED_KEY = "posexport.patched_from"  # marks a model posexport patch wrote (its source file name)


@dataclass
class Patched:
    """What a patch did: the model, and per site the parameters it used."""

    model: onnx.ModelProto
    sites: list[tuple[Site, RopeParams | Extension | None]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        """Per site the parameters the patch used: those recovered from the graph or given, not defaults
        (a rope's; a learned table's extension as it is; nothing for a rewrite that takes none); for a site rebuilt
        to other parameters than it held, how (replaced, rescaled) and the old ones."""
        return [{"site": s.anchor, "kind": s.kind, "params": shown_params(p)} | s.tensors.get("replaced", {})
                for s, p in self.sites]

    def report(self) -> dict[str, Any]:
        """What `posexport patch --json` writes (docs/schemas/patch.json): each site with its parameters, and the
        files written (the model first)."""
        return {"schema_version": SCHEMA_VERSION, "sites": self.describe(), "files": [str(f) for f in self.files]}


def shown_params(p: RopeParams | Extension | None) -> dict[str, Any]:
    if p is None:
        return {}
    if not isinstance(p, RopeParams):
        return params_mod.to_dict(p)
    defaults = params_mod.to_dict(RopeParams())
    return {k: v for k, v in params_mod.to_dict(p).items() if k in SHOWN or v != defaults[k]}


def plan(graph: Graph, values: dict[str, Any] | Candidates | None, position_limit: int | None,
         extension: Extension | None = None, replace_mismatched: bool = False) -> list[tuple[Site, RopeParams | Extension | None]]:
    """Every patchable site with its checked parameters; any doubt is an error naming the node."""
    chosen, left = [], []
    request = Request(values, position_limit, extension, replace_mismatched)
    for site in find_in(graph):
        kind = KINDS[site.kind]
        params = kind.rebuilds.for_patch(kind, graph, site, request)  # what the kind rebuilds says what it takes
        if params is LEFT:
            left.append(f"{site.anchor} ({site.kind})")
        else:
            chosen.append((site, params))
    if extension is not None and not any(isinstance(p, Extension) for _, p in chosen):
        raise PosexportError(f"--extend-learned {extension.rows}: the model has no learned position table (see `posexport doctor`)")
    if not chosen:
        found = f"; found only {', '.join(left)}" if left else ""
        raise PosexportError(f"no positional-encoding site posexport can patch{found} (see `posexport doctor`)")
    return chosen


def patch(model: onnx.ModelProto | str | Path, values: dict[str, Any] | Candidates | None = None,
          position_limit: int | None = None, extension: Extension | None = None, replace_mismatched: bool = False) -> Patched:
    """Patch a model (a ModelProto, which is not changed, or a path, whose external data is read only
    where a site needs it and stays referenced, not loaded): the patched copy and what was used.
    ``values`` are rope options (as ``requested_values`` gives them); None: each site's recognised rope.
    ``extension`` grows every learned position table (``--extend-learned N --strategy S``); ``replace_mismatched``
    rebuilds a site whose parameters disagree with ``values`` to them (``--replace-mismatched``)."""
    source = Path(model) if isinstance(model, (str, Path)) else None
    copy = onnx.ModelProto()
    copy.CopyFrom(load(source) if source is not None else model)
    return rewritten(Graph(copy, source), values, position_limit, extension, replace_mismatched)


def rewritten(graph: Graph, values: dict[str, Any] | Candidates | None, position_limit: int | None,
              extension: Extension | None = None, replace_mismatched: bool = False) -> Patched:
    """Rewrite every site of ``graph`` in place (checked first) and check the result as the source was."""
    passed = passes_checker(graph.model)  # some exporters' models (contrib ops in the default domain) never pass it
    chosen = plan(graph, values, position_limit, extension, replace_mismatched)
    if position_limit is not None:
        ropes = [(s, p) for s, p in chosen if isinstance(p, RopeParams)]
        old = old_limit([s.recovered["rows"] for s, _ in ropes if "rows" in s.recovered], [p.max_positions for _, p in ropes])
        if old is not None:
            check_followers(graph, old, position_limit)
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


def patch_file(src: str | Path, out: str | Path, values: dict[str, Any] | Candidates | None = None,
               position_limit: int | None = None, extension: Extension | None = None, replace_mismatched: bool = False,
               beside: bool = True) -> Patched:
    """Patch the model at ``src`` into ``out`` (external data beside it when the source had some); for
    an onnxruntime-genai folder also write genai_config.json with the new context length, and, in a new
    folder, the files the folder needs; in a new folder, what the exporter's client reads (clients.py:
    optimum's configs, transformers' export.json). Nothing written may be a file the source reads. Only the tensors
    a site reads are loaded; every other stored tensor is carried into the new data file. Without ``values`` (and
    with ``beside``) the rope of a config.json beside the model is the source (``default_source``), said in its notes."""
    src, out = Path(src), Path(out)
    check_destination(out, "--out", folders=True)
    notes: list[str] = []
    if values is None and beside:
        values, notes = default_source(src)
    graph = Graph(load(src), src)
    external, config = set(graph.stored), read_config(src.parent)
    clients = client_files(graph.model, src, out) if config is None else {}  # a genai folder's files are genai_folder's
    check_outputs(planned_outputs(src, out, external, config) + list(clients), source_files(src), src, out)
    try:
        done = rewritten(graph, values, position_limit, extension, replace_mismatched)
    except Unrecognised as e:  # what to add, looked for beside the model
        raise e.in_folder(src) from None
    done.notes = notes
    # A patched model patched again names only its own source: one mark, never a growing list.
    kept = [entry for entry in done.model.metadata_props if entry.key != PATCHED_KEY]
    del done.model.metadata_props[:]
    done.model.metadata_props.extend(kept)
    done.model.metadata_props.add(key=PATCHED_KEY, value=src.name)
    files: dict[Path, Content] = serialise(done.model, out, external, src)
    if config is not None:
        files |= genai_folder(src, out, done, config)
    files |= rope_told(clients, done, position_limit)
    # The model, its data and the folder's files are written as one set: all of them, or none.
    done.files = write_files(files, "--out", stem=out.stem)
    return done


def rope_told(clients: dict[Path, bytes], done: Patched, position_limit: int | None) -> dict[Path, bytes]:
    """The client's files, its config.json saying the rope the patch rebuilt when it changed the rope (replaced,
    rescaled) or was asked for a position limit: optimum's and transformers' clients and the doctor read it there.
    A model of several ropes keeps its config as it is (its blocks per layer type are not rewritten)."""
    config = next((path for path in clients if path.name == "config.json"), None)
    ropes = {json.dumps({k: v for k, v in params_mod.to_dict(p).items() if k != "position_limit"}, sort_keys=True): p
             for _, p in done.sites if isinstance(p, RopeParams)}
    changed = position_limit is not None or any("replaced" in s.tensors for s, _ in done.sites)
    if config is None or len(ropes) != 1 or not changed:
        return clients
    values = params_mod.to_dict(next(iter(ropes.values())))
    return clients | {config: with_rope(clients[config], values, position_limit or 0, config)}


def source_files(src: Path) -> dict[Path, str]:
    """Every file the source reads, resolved, with what it is to the source."""
    files = {guarded.regular_file(src).resolve(): "the model being patched"}
    model = guarded.load_model(src)
    for entry in guarded.external_data(model, src):
        files.setdefault(entry.path, f"its external data {entry.location!r}")
    for name in client_sources(model, src):
        files.setdefault(guarded.regular_file(guarded.inside(src.parent, name)), f"its folder's {name}")
    config = read_config(src.parent)
    if config is not None:
        for name in [GENAI_CONFIG, *companions(src.parent, config, src.name)]:
            files.setdefault(guarded.regular_file(guarded.inside(src.parent, name)), f"its folder's {name}")
    return files


def planned_outputs(src: Path, out: Path, external: set[str], config: dict[str, Any] | None) -> list[Path]:
    """The files a patch of ``src`` into ``out`` writes (as patch_file then writes them)."""
    planned = [out] + ([out.with_name(out.name + ".data")] if external else [])
    if config is not None:
        planned.append(out.parent / GENAI_CONFIG)
        if out.parent.resolve() != src.parent.resolve():
            planned += [out.parent / name for name in companions(src.parent, config, src.name)]
    return planned


def check_outputs(files: list[Path], sources: dict[Path, str], src: Path, out: Path) -> None:
    """No file written is one the source reads (symlinks followed), and every file already there is
    one a previous patch wrote."""
    ours = previous_outputs(out)
    for path in files:
        target = path.resolve()
        if target in sources:
            raise PosexportError(f"--out {out}: would write {path}, which is {sources[target]} ({src}); choose a new "
                                 "folder or name for --out (the source is never modified)")
        if (path.exists() or path.is_symlink()) and path not in ours:
            raise PosexportError(f"--out {out}: {path} exists and is not a file `posexport patch` wrote; remove it or "
                                 "choose another --out")


def previous_outputs(out: Path) -> set[Path]:
    """Files at ``out`` a previous patch wrote (so a patch may be rerun in place): the model, when it
    carries posexport's mark, its data, the files its exporter's client reads, and the genai files of a folder
    whose config names it."""
    if not out.is_file() or out.is_symlink():
        return set()
    try:
        with reading_destinations():  # read to be replaced: no input of the patch
            if not any(entry.key == PATCHED_KEY for entry in guarded.load_model(out).metadata_props):
                return set()
            config = read_config(out.parent)
    except PosexportError:
        return set()
    found = {out, out.with_name(out.name + ".data")} | {out.parent / n for names in CLIENT_FILES.values() for n in names}
    if config is not None and out.name in named_files(config, out.parent / GENAI_CONFIG):
        found |= {out.parent / GENAI_CONFIG} | {out.parent / n for n in TOKENIZER_FILES}
    return found


def genai_folder(src: Path, out: Path, done: Patched, config: dict[str, Any]) -> dict[Path, bytes]:
    """genai_config.json beside the output (decoder file name and context length updated) and, in a new
    folder, the files the source folder's config names and its tokenizer's (regular files inside it)."""
    limits = [p.position_limit for s, p in done.sites if s.kind == CacheKind.name]
    model_cfg = config.setdefault("model", {})
    old = model_cfg.get("context_length")
    if limits:
        model_cfg["context_length"] = min(limits)
        search = config.get("search", {})
        if search.get("max_length") == old:
            search["max_length"] = min(limits)
    model_cfg.setdefault("decoder", {})["filename"] = out.name
    files = {out.parent / GENAI_CONFIG: (json.dumps(config, indent=4) + "\n").encode()}
    if out.parent.resolve() != src.parent.resolve():
        for name in companions(src.parent, config, out.name):
            files[out.parent / name] = guarded.read_bytes(name, root=src.parent)
    return files
