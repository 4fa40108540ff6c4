"""``posexport patch``: each site replaced by posexport's exact maths, nothing else changed. Every site is
checked before anything is rewritten, so an unsafe or ambiguous site leaves no output at all."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from .. import params as params_mod
from ..errors import PosexportError
from ..files import check_destination, write_files
from ..rope.encoding import RopeParams
from .find import KINDS, find_in
from .graph import Graph, external_names, load, serialise
from .learned_table import Extension
from .rope_cache import CacheKind
from .sites import Site
from .source import Candidates, choose

GENAI_CONFIG = "genai_config.json"
# What a patched site computes from, shown even at their defaults; any other field only where it is not
# the default (heads, layout or max_positions at their defaults were never read from the graph).
SHOWN = ("head_dim", "rotary_dim", "base", "scaling", "position_limit")


@dataclass
class Patched:
    """What a patch did: the model, and per site the parameters it used."""

    model: onnx.ModelProto
    sites: list[tuple[Site, RopeParams | Extension | None]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def describe(self) -> list[dict[str, Any]]:
        """Per site the parameters the patch used: those recovered from the graph or given, not defaults
        (a rope's; a learned table's extension as it is; nothing for a rewrite that takes none)."""
        return [{"site": s.anchor, "kind": s.kind, "params": shown_params(p)} for s, p in self.sites]


def shown_params(p: RopeParams | Extension | None) -> dict[str, Any]:
    if p is None:
        return {}
    if not isinstance(p, RopeParams):
        return params_mod.to_dict(p)
    defaults = params_mod.to_dict(RopeParams())
    return {k: v for k, v in params_mod.to_dict(p).items() if k in SHOWN or v != defaults[k]}


def plan(graph: Graph, values: dict[str, Any] | Candidates | None, position_limit: int | None,
         extension: Extension | None = None) -> list[tuple[Site, RopeParams | Extension | None]]:
    """Every patchable site with its checked parameters; any doubt is an error naming the node."""
    chosen, left = [], []
    for site in find_in(graph):
        kind = KINDS[site.kind]
        if kind.takes == "extension" and extension is not None:
            kind.check(graph, site, extension)
            chosen.append((site, extension))
        elif not kind.patchable:
            left.append(f"{site.anchor} ({site.kind})")
        elif kind.takes == "nothing":
            kind.check(graph, site, None)
            chosen.append((site, None))
        else:
            if "rotary_dim" not in site.recovered:
                kind.check(graph, site, None)  # nothing recovered to patch with: raises, naming the node
            chosen.append((site, choose(site, values, position_limit, lambda p, k=kind, s=site: k.check(graph, s, p))))
    if extension is not None and not any(isinstance(p, Extension) for _, p in chosen):
        raise PosexportError(f"--extend-learned {extension.rows}: the model has no learned position table (see `posexport doctor`)")
    if not chosen:
        found = f"; found only {', '.join(left)}" if left else ""
        raise PosexportError(f"no positional-encoding site posexport can patch{found} (see `posexport doctor`)")
    return chosen


def patch(model: onnx.ModelProto | str | Path, values: dict[str, Any] | Candidates | None = None,
          position_limit: int | None = None, extension: Extension | None = None) -> Patched:
    """Patch a model (a ModelProto, which is not changed, or a path): the patched copy and what was used.
    ``values`` are rope options (as ``requested_values`` gives them); None: each site's recognised rope.
    ``extension`` grows every learned position table (``--extend-learned N --strategy S``)."""
    if isinstance(model, (str, Path)):
        model = load(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = Graph(copy)
    chosen = plan(graph, values, position_limit, extension)
    for site, p in chosen:
        KINDS[site.kind].rewrite(graph, site, p)
    if passes_checker(model):  # some exporters' models (contrib ops in the default domain) never pass it
        onnx.checker.check_model(copy)
    return Patched(copy, chosen)


def passes_checker(model: onnx.ModelProto) -> bool:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError:
        return False
    return True


def patch_file(src: str | Path, out: str | Path, values: dict[str, Any] | Candidates | None = None,
               position_limit: int | None = None, extension: Extension | None = None) -> Patched:
    """Patch the model at ``src`` into ``out`` (external data beside it when the source had some); for
    an onnxruntime-genai folder also write genai_config.json with the new context length."""
    src, out = Path(src), Path(out)
    if out.resolve() == src.resolve():
        raise PosexportError(f"--out {out}: choose a path other than the model being patched")
    check_destination(out, "--out", folders=True)
    done = patch(load(src), values, position_limit, extension)
    files = serialise(done.model, out, external_names(src))
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
