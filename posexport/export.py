"""Build ONNX graphs from an encoding (onnxscript function or torch.onnx export), save them with their
manifest, and load them back.

Builds are deterministic: the same arguments give byte-identical .onnx and .json files.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import json
import logging
import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import torch

from . import __version__, guarded, params as params_mod
from .contract import SCHEMA_VERSION, AUTO, BACKENDS, DEFAULT_OPSET, DEFAULT_TARGET, DOMAIN, DOMAIN_VERSION, MIN_OPSET, PORTABLE, SOURCES, Artifact, BuildOptions, TensorSpec
from .dtypes import DTYPES, DType, get_dtype
from .encodings.base import Encoding
from .encodings.guards import guard_graph
from .errors import PosexportError
from .files import check_stem, write_files
from .guarded import is_external, model_tensors
from .registry import ENCODINGS, get_encoding
from .rope.backends import resolve_backend
from .script import callees_first, called_functions, check_opset, newest_opset, standard_opset

PACKAGES = ("onnx", "onnxruntime", "onnxscript", "torch", "numpy")


def serialize(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString(deterministic=True)


def value_info(spec: TensorSpec, dtype: DType) -> onnx.ValueInfoProto:
    elem = dtype.onnx if spec.is_float else onnx.TensorProto.INT64
    return oh.make_tensor_value_info(spec.name, elem, list(spec.dims))


def build(
    encoding: str | Encoding,
    params: Any = None,
    *,
    dtype: str = "float32",
    opset: int = DEFAULT_OPSET,
    source: str = "script",
    backend: str = "auto",
    target: str = DEFAULT_TARGET,
) -> Artifact:
    """Build one graph. ``params`` is the encoding's Params object, a dict of raw values, or None.
    ``backend`` picks the rope expression (posexport.backends); ``auto`` the fastest for ``target``."""
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    if params is None or isinstance(params, dict):
        params = enc.params(**(params or {}))
    if source not in SOURCES:
        raise PosexportError(f"--source {source!r}: choose one of {', '.join(SOURCES)}")
    chosen = resolve_backend(backend, enc.family, check_opset(opset), target)
    if source == "torch" and chosen != PORTABLE:
        if backend != AUTO:
            raise PosexportError(f"--backend {backend}: the torch export expresses the module's own maths; use --source script")
        chosen = PORTABLE
    opts = BuildOptions(get_dtype(dtype), opset, chosen)
    model = script_model(enc, params, opts) if source == "script" else torch_model(enc, params, opts)
    model.producer_name = "posexport"
    model.producer_version = __version__
    model.doc_string = f"posexport {enc.name} ({source})"
    onnx.checker.check_model(model)
    data = serialize(model)
    manifest = make_manifest(enc, params, opts, source, model, data)
    return Artifact(model, manifest, enc, params, opts)


def script_model(enc: Encoding, p: Any, opts: BuildOptions) -> onnx.ModelProto:
    """A graph of one node calling the encoding's onnxscript function, which stays model-local."""
    functions = enc.script_functions(p, opts, standard_opset(opts.opset))
    tables = enc.tables(p, opts).arrays
    inputs, outputs = enc.inputs(p), enc.outputs(p)
    entry = functions[0].to_function_proto()
    node = oh.make_node(
        entry.name,
        [s.name for s in inputs] + list(tables),
        [s.name for s in outputs],
        domain=DOMAIN,
        name=entry.name,
    )
    graph = oh.make_graph(
        [node],
        f"posexport_{enc.name}",
        [value_info(s, opts.dtype) for s in inputs],
        [value_info(s, opts.dtype) for s in outputs],
        initializer=[onh.from_array(array, name) for name, array in tables.items()],
    )
    protos = callees_first([entry] + [f.to_function_proto() for f in called_functions(functions)])
    imports = {"": opts.opset, DOMAIN: DOMAIN_VERSION}
    for proto in protos:
        for imp in proto.opset_import:
            imports.setdefault(imp.domain, imp.version)
    return oh.make_model(
        graph,
        functions=protos,
        opset_imports=[oh.make_opsetid(d, v) for d, v in sorted(imports.items())],
        ir_version=10,
    )


EXAMPLE_SIZES = (2, 5, 3, 7, 11, 13)


def example_axes(enc: Encoding, p: Any) -> dict[str, int]:
    """Distinct sizes for the dynamic axes, so the exporter cannot mistake one axis for another."""
    names: list[str] = []
    for spec in enc.inputs(p):
        names += [d for d in spec.dims if isinstance(d, str) and d not in names]
    return enc.example_axes(p) or dict(zip(names, EXAMPLE_SIZES))


def torch_model(enc: Encoding, p: Any, opts: BuildOptions) -> onnx.ModelProto:
    """torch.onnx.export(dynamo=True) of the encoding's module, with the contract's names and axes."""
    module = enc.torch_module(p, opts).eval()
    axes = example_axes(enc, p)
    specs = enc.inputs(p)
    dims = {name: torch.export.Dim(name, min=1) for name in axes}
    examples = []
    for spec in specs:
        shape = [axes[d] if isinstance(d, str) else d for d in spec.dims]
        examples.append(torch.ones(shape, dtype=opts.dtype.torch) if spec.is_float else torch.zeros(shape, dtype=torch.int64))
    dynamic_shapes = {
        spec.name: {i: dims[d] for i, d in enumerate(spec.dims) if isinstance(d, str)} for spec in specs
    }
    with quiet_exporter(), torch.no_grad():
        program = torch.onnx.export(
            ExportWrapper(module, [s.name for s in specs]),
            tuple(examples),
            dynamo=True,
            input_names=[s.name for s in specs],
            output_names=[s.name for s in enc.outputs(p)],
            dynamic_shapes=dynamic_shapes,
            opset_version=opts.opset,
            optimize=True,
            verbose=False,
        )
    model = program.model_proto
    model.ClearField("metadata_props")
    for nodes in (model.graph.node, *(function.node for function in model.functions)):
        without_stack_traces(nodes)
    # Output axes the exporter names by expression (grid_h*grid_w + 1) get the contract's name.
    for value, spec in zip(model.graph.output, enc.outputs(p)):
        for dim, name in zip(value.type.tensor_type.shape.dim, spec.dims):
            if isinstance(name, str):
                dim.dim_param = name
    return guard_graph(model, specs, opts.opset)  # position_ids must be [batch, seq] of x, as in script graphs


STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"


def without_stack_traces(nodes: Iterable[onnx.NodeProto]) -> None:
    """The exporter's per-node stack traces quote this install's file paths and line numbers: a graph would
    carry the builder's paths and change bytes with any edit of posexport's sources. Dropped; the node's
    name scopes and module classes stay."""
    for node in nodes:
        kept = [entry for entry in node.metadata_props if entry.key != STACK_TRACE_KEY]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
        for attribute in node.attribute:
            for subgraph in [*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs]:
                without_stack_traces(subgraph.node)


class ExportWrapper(torch.nn.Module):
    """Gives forward the contract's argument names, which dynamic_shapes refers to."""

    def __init__(self, module: torch.nn.Module, names: list[str]):
        super().__init__()
        self.module = module
        # torch.export reads forward's signature: give it the contract's names, positional only.
        self.forward_signature = inspect.Signature(
            [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names])

        def forward(*args: Any) -> Any:
            return self.module(*args)

        forward.__signature__ = self.forward_signature  # type: ignore[attr-defined]
        self.forward = forward


@contextlib.contextmanager
def quiet_exporter():
    """torch.onnx prints progress and warnings that would drown the CLI's own output."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "torch.fx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def versions() -> dict[str, str]:
    out = {"posexport": __version__}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def make_manifest(enc: Encoding, p: Any, opts: BuildOptions, source: str, model: onnx.ModelProto, data: bytes) -> dict[str, Any]:
    def signature(specs: list[TensorSpec]) -> list[dict[str, Any]]:
        return [{"name": s.name, "dims": list(s.dims), "dtype": opts.dtype.name if s.is_float else "int64"} for s in specs]

    return {
        "encoding": enc.name,
        "family": enc.family,
        "params": params_mod.to_dict(p),
        "dtype": opts.dtype.name,
        "opset": opts.opset,
        "source": source,
        "backend": opts.backend,
        "inputs": signature(enc.inputs(p)),
        "outputs": signature(enc.outputs(p)),
        "tables": {i.name: list(i.dims) for i in model.graph.initializer if len(i.dims) > 1},
        "versions": versions(),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def write_graph(model_bytes: bytes, manifest: dict[str, Any], out_dir: str | Path, name: str) -> tuple[Path, Path]:
    """NAME.onnx and NAME.json in out_dir (created if needed), written together (posexport.files: both
    temporaries before either rename, under the name's lock); a folder that cannot be written is one error
    line naming --out. NAME is a plain file stem."""
    check_stem(name)
    out = Path(out_dir)
    with contextlib.suppress(OSError):  # a folder that cannot be made shows as the write below failing
        out.mkdir(parents=True, exist_ok=True)
    manifest_text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    onnx_path, json_path = write_files({out / f"{name}.onnx": model_bytes, out / f"{name}.json": manifest_text}, "--out")
    return onnx_path, json_path


def save(artifact: Artifact, out_dir: str | Path, name: str | None = None) -> tuple[Path, Path]:
    """Write NAME.onnx and NAME.json into out_dir (created if needed); NAME defaults to the artifact's
    (the encoding's name; an IndexShare block's rope_indexshare)."""
    return write_graph(artifact.model_bytes, artifact.manifest, out_dir, artifact.default_name if name is None else name)


def written(graph: Artifact, onnx_path: Path, json_path: Path) -> dict[str, Any]:
    """One written graph as `build --json` lists it: its files and what identifies it."""
    m = graph.manifest
    return {"onnx": str(onnx_path), "manifest": str(json_path), "encoding": m["encoding"], "dtype": m["dtype"],
            "bytes": m["bytes"], "sha256": m["sha256"]}


def build_report(graphs: Iterable[tuple[Artifact, tuple[Path, Path]]], **extra: Any) -> dict[str, Any]:
    """What `posexport build --json` writes (docs/schemas/build.json): every graph saved, and ``extra``."""
    return {"schema_version": SCHEMA_VERSION, "graphs": [written(g, *paths) for g, paths in graphs], **extra}


def load(path: str | Path) -> Artifact:
    """Read a built graph and the manifest beside it. What was not written by `posexport build` is refused
    before anything runs it (docs/trust.md): a manifest whose sha256 is not the graph's, fields out of
    range, an unpinned weights file, and any tensor stored as external data."""
    onnx_path = Path(path)
    json_path = onnx_path.with_suffix(".json")
    if not onnx_path.is_file():
        raise PosexportError(f"{onnx_path}: {not_a_file(onnx_path)}")
    data = guarded.read_bytes(onnx_path)  # a regular file within the byte budget
    try:
        model = onnx.load_model_from_string(data)
    except Exception:
        raise PosexportError(f"{onnx_path}: not an ONNX model; {BUILT_GRAPH}") from None
    if not json_path.is_file():
        raise PosexportError(f"{onnx_path}: {without_manifest(model, onnx_path)}")
    manifest = read_manifest(json_path)
    check_manifest(manifest, json_path, data)
    refuse_external_data(model, onnx_path)
    try:
        enc = get_encoding(manifest["encoding"])
        p = enc.params(**manifest["params"])
        opts = BuildOptions(get_dtype(manifest["dtype"]), manifest["opset"], manifest["backend"])
    except (ValueError, KeyError, TypeError) as e:
        raise PosexportError(f"{json_path}: not a posexport manifest ({e})") from None
    check_contract(model, enc, p, opts, onnx_path)
    return Artifact(model, manifest, enc, p, opts)


BUILT_GRAPH = "expected a graph `posexport build` wrote (NAME.onnx, its manifest NAME.json beside it)"


def not_a_file(path: Path) -> str:
    """Why ``path`` is no graph to load, and what the user more likely meant: a model folder, a folder of graphs."""
    if not path.is_dir():
        return f"no such file; {BUILT_GRAPH}"
    if (path / "config.json").is_file():
        return f"a model folder: its encodings are built and checked with `--from-model {path}`"
    graphs = sorted(p.name for p in path.glob("*.onnx") if p.with_suffix(".json").is_file())
    if graphs:
        return f"a folder; name a graph in it, e.g. {path / graphs[0]}"
    return f"a folder; {BUILT_GRAPH}"


def without_manifest(model: onnx.ModelProto, path: Path) -> str:
    """A .onnx without its manifest: an exported model (doctor and model-parity check those), or a built graph
    whose manifest was lost."""
    if model.producer_name == "posexport":
        return f"no manifest {path.with_suffix('.json').name} beside it; rebuild the graph with `posexport build`"
    return (f"an exported model ({model.producer_name or 'no producer named'}), not a graph `posexport build` wrote: "
            f"find its positional-encoding sites with `posexport doctor {path}`, and check it whole with "
            f"`posexport model-parity --model {path} --against ORIGINAL.onnx` (or --against-hf MODEL_DIR)")


MAX_MANIFEST_BYTES = 1 << 24


def read_manifest(json_path: Path) -> dict[str, Any]:
    """The manifest as a dict; anything else (not JSON, nested past Python's recursion limit, huge) is one
    error line."""
    if json_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise PosexportError(f"{json_path}: not a posexport manifest (over {MAX_MANIFEST_BYTES:,} bytes)")
    try:
        manifest = json.loads(guarded.read_bytes(json_path, max_bytes=MAX_MANIFEST_BYTES))
    except (ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise PosexportError(f"{json_path}: not a posexport manifest ({why})") from None
    if not isinstance(manifest, dict):
        raise PosexportError(f"{json_path}: not a posexport manifest (expected a JSON object)")
    return manifest


def manifest_field(manifest: dict[str, Any], key: str, ok: Callable[[Any], bool], json_path: Path, accepts: str) -> None:
    value = manifest.get(key)
    if not ok(value):
        raise PosexportError(f"{json_path}: {key} = {json.dumps(value)[:80]}: expected {accepts}; rebuild with `posexport build`")


def check_manifest(manifest: dict[str, Any], json_path: Path, data: bytes) -> None:
    """Fields a runtime or a file read depends on, checked before any is used: the graph's sha256, the opset,
    the backend, the source, and a weights file pinned by absolute path and sha256."""
    digest = hashlib.sha256(data).hexdigest()
    manifest_field(manifest, "sha256", lambda v: v == digest, json_path,
                   f"the sha256 of {json_path.with_suffix('.onnx').name} ({digest[:12]}…): the graph and its manifest are not a pair")
    newest = newest_opset()
    manifest_field(manifest, "opset", lambda v: type(v) is int and MIN_OPSET <= v <= newest, json_path,
                   f"an integer opset from {MIN_OPSET} to {newest}")
    built = [b for b in BACKENDS if b != AUTO]
    manifest_field(manifest, "backend", lambda v: v in built, json_path, f"one of {', '.join(built)}")
    manifest_field(manifest, "source", lambda v: v in SOURCES, json_path, f"one of {', '.join(SOURCES)}")
    manifest_field(manifest, "encoding", lambda v: isinstance(v, str) and v in ENCODINGS, json_path, "a name `posexport list` shows")
    manifest_field(manifest, "dtype", lambda v: isinstance(v, str) and v in DTYPES, json_path, f"one of {', '.join(DTYPES)}")
    manifest_field(manifest, "params", lambda v: isinstance(v, dict), json_path, "an object of parameters")
    check_pinned_weights(manifest["params"], json_path)


def check_pinned_weights(params: dict[str, Any], json_path: Path) -> None:
    """A build pins a weights file by absolute path and sha256; an unpinned or relative one would be read
    from wherever the command runs."""
    weights, digest = params.get("weights"), params.get("weights_sha256")
    if weights is None:
        return
    if not isinstance(weights, str) or not Path(weights).is_absolute():
        raise PosexportError(f"{json_path}: params.weights = {json.dumps(weights)[:80]}: expected an absolute path, "
                             "as `posexport build` records it")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise PosexportError(f"{json_path}: params.weights_sha256 = {json.dumps(digest)[:80]}: expected the sha256 "
                             "of the weights file, as `posexport build` records it (an unpinned file is refused)")


def refuse_external_data(model: onnx.ModelProto, path: Path) -> None:
    """posexport never writes external data; a graph that points at other files (which runtimes would
    read from the working directory) is refused before any runtime sees it."""
    for tensor in model_tensors(model):
        if is_external(tensor):
            location = next((e.value for e in tensor.external_data if e.key == "location"), "?")
            raise PosexportError(
                f"{path}: tensor {tensor.name[:80]!r} is stored as external data ({location[:80]!r}); posexport only loads "
                "self-contained graphs it built"
            )


def check_contract(model: onnx.ModelProto, enc: Encoding, p: Any, opts: BuildOptions, path: Path) -> None:
    """The graph's inputs and outputs must be the ones the manifest's encoding promises (docs/contract.md)."""
    for kind, actual, expected in (("inputs", model.graph.input, enc.inputs(p)), ("outputs", model.graph.output, enc.outputs(p))):
        got = [(v.name, v.type.tensor_type.elem_type) for v in actual]
        want = [(s.name, opts.dtype.onnx if s.is_float else onnx.TensorProto.INT64) for s in expected]
        if got != want:
            raise PosexportError(
                f"{path}: graph {kind} {[n for n, _ in got]} do not match the {enc.name} contract {[n for n, _ in want]}"
            )
