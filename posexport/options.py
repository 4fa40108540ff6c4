"""The library entry the `posexport` command and Python users share: build graphs and check their parity
from the same options the command takes, with the same checks and the same one-line errors.

    from posexport.options import build_from_options
    built = build_from_options(encoding="alibi", values={"heads": 8, "causal": False}, dtype="float16")
    built.save("graphs/build")

Values are the encoding's parameters, raw (strings from a command line, or Python values); a preset or a
model's config.json gives rope's parameters, which ``values`` then override.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import export
from .contract import AUTO, DEFAULT_OPSET, DEFAULT_TARGET, Artifact
from .dtypes import dtypes_of
from .errors import PosexportError, UnknownOption
from .files import check_destination, check_stem
from .verdicts import Outputs, Report, check_settings, run_parity
from .rope import config
from .indexshare import build_block




@dataclass
class Built:
    """Graphs built from options (one per dtype) and the name they are saved under by default."""

    graphs: list[Artifact]
    name: str | None = None  # the preset's name, or MODEL-rope for a config, when built from one

    def save(self, out_dir: str | Path, name: str | None = None) -> list[tuple[Path, Path]]:
        """NAME.onnx and NAME.json per graph (NAME-DTYPE when several dtypes were built); NAME defaults to
        the preset's, then the encoding's (rope_indexshare… for an IndexShare block)."""
        if name is not None:
            check_stem(name)
        return [self.save_one(g, out_dir, self.name if name is None else name) for g in self.graphs]

    def save_report(self, out_dir: str | Path, name: str | None = None) -> dict[str, Any]:
        """Save, and say what was written: `posexport build --json` (docs/schemas/build.json)."""
        return export.build_report(zip(self.graphs, self.save(out_dir, name)))

    def save_one(self, graph: Artifact, out_dir: str | Path, stem: str | None) -> tuple[Path, Path]:
        if len(self.graphs) > 1:
            stem = f"{stem or graph.manifest.get('kind', graph.manifest['encoding'])}-{graph.manifest['dtype']}"
        return export.save(graph, out_dir, stem)


def config_stem(path: str | Path) -> str:
    """The default name of a graph built from a config file: its model's name and the encoding
    (Meta-Llama-3.1-8B/config.json -> Meta-Llama-3.1-8B-rope, as --from-model names it; llama.json -> llama-rope)."""
    path = Path(path).resolve()
    return f"{path.parent.name if path.stem == 'config' else path.stem}-rope"


def encoding_values(encoding: str, values: Mapping[str, Any], preset: str | None,
                    from_config: str | Path | None) -> tuple[str, dict[str, Any]]:
    """(encoding, values): a preset's or a config's rope parameters, overridden by ``values``."""
    if not (preset or from_config):
        return encoding, dict(values)
    if preset and from_config:
        raise PosexportError(f"--preset {preset} and --from-config {from_config}: choose one")
    if encoding != "rope":
        raise PosexportError(f"--encoding {encoding}: --preset and --from-config give rope's parameters")
    base = config.from_preset(preset) if preset else config.from_config_file(from_config)
    return "rope", {**base, **values}


def build_from_options(
    encoding: str = "rope",
    values: Mapping[str, Any] | None = None,
    *,
    preset: str | None = None,
    from_config: str | Path | None = None,
    indexshare: bool = False,
    layers: int = 2,
    kv_heads: int | None = None,
    unfused: bool = False,
    dtype: str | Sequence[str] = "float32",
    opset: int = DEFAULT_OPSET,
    source: str = "script",
    backend: str = AUTO,
    target: str = DEFAULT_TARGET,
) -> Built:
    """Build one graph per dtype (``dtype`` may name several, comma-separated) from an encoding and its
    parameter values, or from a rope ``preset`` / model ``from_config`` that ``values`` override. With
    ``indexshare``, rope's N-layer attention block (``layers``, ``kv_heads``; ``unfused`` for the
    baseline) instead of the encoding graph. Nothing is written until ``Built.save``."""
    encoding, values = encoding_values(encoding, values or {}, preset, from_config)
    if indexshare and encoding != "rope":
        raise PosexportError(f"--indexshare: only rope has an IndexShare block, not --encoding {encoding}")
    graphs: list[Artifact] = []
    for name in dtypes_of(dtype):
        if indexshare:
            graphs.append(build_block(values, layers=layers, kv_heads=kv_heads or None, dtype=name,
                                      fused=not unfused, opset=opset))
        else:
            graphs.append(export.build(encoding, values, dtype=name, opset=opset, source=source, backend=backend,
                                       target=target))
    return Built(graphs, preset or (config_stem(from_config) if from_config else None))


def parity_graphs(graph: str | Path | None = None, values: Mapping[str, Any] | None = None, *,
                  encoding: str = "rope", dtype: str | Sequence[str] | None = None, **build: Any) -> list[Artifact]:
    """The graphs a parity run checks: a built GRAPH (.onnx with its manifest), or graphs built from the
    encoding and its values, one per dtype (``build`` takes build_from_options' other options)."""
    if graph is None:
        return build_from_options(encoding, values, dtype=dtype or "float32", **build).graphs
    given = [*(values or {}), *(name for name in ("preset", "from_config") if build.get(name))]
    if given:
        raise UnknownOption(given[0], problem="encoding options go with --encoding, not with a built GRAPH")
    if dtype not in (None, "float32"):
        raise PosexportError(f"--dtype {dtype}: a built GRAPH has its own dtype; --dtype goes with --encoding")
    return [export.load(graph)]


def parity_from_options(
    graph: str | Path | None = None,
    values: Mapping[str, Any] | None = None,
    *,
    encoding: str = "rope",
    preset: str | None = None,
    from_config: str | Path | None = None,
    dtype: str | Sequence[str] | None = None,
    opset: int = DEFAULT_OPSET,
    source: str = "script",
    backend: str = AUTO,
    target: str = DEFAULT_TARGET,
    save_outputs: str | Path | None = None,
    load_outputs: str | Path | None = None,
    **run: Any,
) -> Report:
    """`posexport parity`: the graphs of :func:`parity_graphs` on every runtime, judging outputs saved by
    another run too (``load_outputs``) and saving this run's (``save_outputs``). ``run`` takes
    posexport.verdicts.run_parity's options: runtimes, seqs, batches, seed, tolerance, pairwise, properties,
    progress. Settings and the --save-outputs destination are checked before anything is built or run."""
    check_settings(run.get("tolerance"), run.get("seed", 0))
    if save_outputs is not None:
        check_destination(save_outputs, "--save-outputs")
    artifacts = parity_graphs(graph, values, encoding=encoding, preset=preset, from_config=from_config, dtype=dtype,
                              opset=opset, source=source, backend=backend, target=target)
    saved = Outputs.load(load_outputs) if load_outputs else None
    report = run_parity(artifacts, keep_outputs=save_outputs is not None, saved=saved, **run)
    if save_outputs is not None:
        report.outputs.save(save_outputs)
    return report
