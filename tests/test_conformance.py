"""Registry-driven conformance: every registered encoding, built from both sources in every dtype, passes a
small parity sweep on onnxruntime (CPU) and the ONNX reference evaluator, its declared properties
included, judged against the float64 oracle with the usual bounds (docs/numerics.md). Adding an encoding
to posexport.registry adds it here with no new test code.

A toy tenth encoding defined below shows that one `registry.register(...)` line is all build, list,
parity and bench need.

Torch exports take seconds each, so the torch source is built in one dtype per encoding (the dtypes taken
in turn across the registry, so every source × dtype pair is covered); POSEXPORT_FULL_CONFORMANCE=1 builds
the torch source in every dtype too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from onnxscript import script

from posexport import export, registry, verdicts
from posexport.encodings import properties
from posexport.contract import BuildOptions, Case, Property, Tables
from posexport.dtypes import COMPUTE
from posexport.errors import PosexportError
from posexport.params import check, param
from posexport.script import POSEXPORT
from posexport.encodings.inputs import sequence_cases
from posexport.encodings.kinds.rows import AdditiveRows
from posexport.reports.parity import verdict_line
from posexport.runtimes import RUNTIMES as RUNTIME_REGISTRY

from .conftest import artifact
from .encoding_checks import DTYPES, RUNTIMES

# Small sizes keep each build and sweep quick; an encoding not listed here runs with its defaults.
SMALL: dict[str, dict[str, Any]] = {
    "rope": dict(head_dim=16, heads=2, max_positions=512, position_limit=8192),
    "sinusoidal": dict(d_model=16, position_limit=8192),
    "learned": dict(d_model=16, max_positions=64),
    "t5": dict(heads=2, num_buckets=8, max_distance=20),
    "alibi": dict(heads=3),
    "vit-learned": dict(dim=8, trained_h=3, trained_w=4, max_grid=16),
    "sincos-2d": dict(dim=8, max_grid=16),
    "swin": dict(heads=2, window_h=3, window_w=2),
    "rope-2d": dict(head_dim=8, heads=2, max_grid=16),
    "query-scale": dict(head_dim=8, heads=2, floor_scale=64, max_positions=512),
}
SWEEP = dict(seqs=(2, 5), batches=(1, 2))
FULL = os.environ.get("POSEXPORT_FULL_CONFORMANCE") == "1"


def matrix() -> list[tuple[str, str, str]]:
    out = []
    for index, name in enumerate(registry.ENCODINGS):
        for dtype in DTYPES:
            out.append((name, "script", dtype))
            if FULL or dtype == DTYPES[index % len(DTYPES)]:
                out.append((name, "torch", dtype))
    return out


def conforms(art: export.Artifact) -> verdicts.Report:
    """The small sweep and every declared property on both runtimes; the report must pass."""
    report = verdicts.run_parity(art, list(RUNTIMES), **SWEEP)
    assert not report.unavailable, report.unavailable
    assert report.passed, verdict_line(report) + "".join(
        f"\n  {r.runtime} {r.case}: {r.status} {r.message}" for r in report.failures()
    ) + "".join(f"\n  {p.runtime} {p.property}: {p.status} {p.detail}" for p in report.properties if p.status != "pass")
    return report


@pytest.mark.parametrize("name, source, dtype", matrix())
def test_every_registered_encoding_conforms(name, source, dtype):
    art = artifact(name, dtype=dtype, source=source, **SMALL.get(name, {}))
    report = conforms(art)
    declared = {prop.name for prop in art.encoding.properties(art.params)}
    assert {(p.property, p.runtime) for p in report.properties} == {(n, r) for n in declared for r in RUNTIMES}


# Forms beyond an encoding's defaults, swept as the defaults are: each from both sources, in two dtypes.
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "mrope": {
        # GLM-4V: chunked sections on a partial rotary, interleaved pairs; GLM-4.5V: the same, half-split.
        "glm4v": dict(head_dim=16, heads=2, rotary_dim=8, mrope_section=(2, 1, 1), pair_layout="interleaved"),
        "glm4v_moe": dict(head_dim=16, heads=2, rotary_dim=8, mrope_section=(2, 1, 1), layout="bhsd"),
    },
}


def variant_matrix() -> list[Any]:
    return [pytest.param(name, values, source, dtype, id=f"{name}-{form}-{source}-{dtype}")
            for name, forms in VARIANTS.items() for form, values in forms.items()
            for source, dtype in (("script", "bfloat16"), ("torch", "float16"))]


@pytest.mark.parametrize("name, values, source, dtype", variant_matrix())
def test_encoding_variants_conform(name, values, source, dtype):
    conforms(artifact(name, dtype=dtype, source=source, **values))


# The runtimes that start a browser (ort-web-wasm, ort-webgpu) each get one entry: a rope graph on every rope
# backend and an attention bias, swept as above, in the one browser of the test session. Every encoding and
# backend on them, and the ops beneath, is `make web-conformance` (docs/runtimes.md).
BROWSER = [name for name, rt in RUNTIME_REGISTRY.items() if not rt.runs_by_default]


@pytest.mark.parametrize("runtime", BROWSER)
def test_browser_runtimes_conform(runtime):
    ok, why = RUNTIME_REGISTRY[runtime].available()
    if not ok:
        pytest.skip(f"{runtime} unavailable: {why}")
    for name, backend in (("rope", "ort"), ("rope", "onnx23"), ("rope", "portable"), ("alibi", "portable")):
        art = artifact(name, backend=backend, opset=23 if backend == "onnx23" else export.DEFAULT_OPSET, **SMALL[name])
        report = verdicts.run_parity(art, ["ort-cpu", runtime], **SWEEP)
        assert not report.unavailable and report.passed, verdict_line(report) + "".join(
            f"\n  {r.runtime} {r.case}: {r.status} {r.message}" for r in report.failures())
        assert {r.runtime for r in report.results} == {"ort-cpu", runtime}
        limits = {p.property for p in report.properties if p.runtime == runtime and p.status == "limitation"}
        assert limits <= set(RUNTIME_REGISTRY[runtime].limitations)


@pytest.mark.parametrize("source", export.SOURCES)
@pytest.mark.parametrize("pair_layout", ["concat", "concat-cos"])
def test_sinusoidal_pair_layouts_conform(pair_layout, source):
    """The matrix builds sinusoidal's default (interleaved) layout; its other channel orders conform too."""
    art = artifact("sinusoidal", source=source, pair_layout=pair_layout, **SMALL["sinusoidal"])
    conforms(art)


def test_the_conformance_matrix_covers_every_source_and_dtype():
    cells = matrix()
    assert {name for name, _, _ in cells} == set(registry.ENCODINGS) and len(registry.ENCODINGS) >= 9
    assert {(source, dtype) for _, source, dtype in cells} == {(s, d) for s in export.SOURCES for d in DTYPES}


# --- a toy tenth encoding: a constant offset added to x, on the additive-rows kind --------------------


@dataclass(frozen=True)
class ToyParams:
    d_model: int = param(8, "channels of x")
    offset: float = param(0.5, "the constant added to every channel")
    rows: int = param(256, "positions the graph covers; any other raises")

    def __post_init__(self) -> None:
        check(self.d_model >= 1, "d_model", self.d_model, "needs at least 1 channel")
        check(self.rows >= 32, "rows", self.rows, "needs at least 32 rows")


class ToyRows(torch.nn.Module):
    def __init__(self, p: ToyParams):
        super().__init__()
        self.register_buffer("table", torch.full((p.rows, p.d_model), p.offset, dtype=torch.float32), persistent=False)
        self.rows = p.rows

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        safe = torch.where(position_ids < 0, self.rows, position_ids)
        return (x.to(torch.float32) + torch.nn.functional.embedding(safe, self.table)).to(x.dtype)


def toy_reference(p: ToyParams, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
    pos = np.asarray(feeds["position_ids"])
    if pos.size and (pos.min() < 0 or pos.max() >= p.rows):
        raise PosexportError(f"position_ids outside [0, {p.rows})")
    return np.asarray(feeds["x"]).astype(np.float64) + p.offset


class ToyEncoding(AdditiveRows):
    name = "toy-offset"
    entry = "ToyOffset"
    Params = ToyParams
    oracle = staticmethod(toy_reference)
    Module = ToyRows

    def tables(self, p: ToyParams, opts: BuildOptions) -> Tables:
        return Tables({"offsets": np.full((p.rows, p.d_model), p.offset, dtype=COMPUTE.numpy)})

    def row_functions(self, p: ToyParams, op: Any) -> list[Any]:
        rows = p.rows

        @script(POSEXPORT, default_opset=op)
        def ToyOffsetRows(position_ids, offsets):
            negative = op.Less(position_ids, op.Constant(value_int=0))
            return op.Gather(offsets, op.Where(negative, op.Constant(value_int=rows), position_ids))

        return [ToyOffsetRows]

    def position_limit(self, p: ToyParams) -> int:
        return p.rows

    def cases(self, p: ToyParams, seqs: tuple[int, ...] | None = None, batches: tuple[int, ...] | None = None) -> list[Case]:
        return sequence_cases(p.rows // 2, p.rows, tuple(s for s in seqs or (1, 17) if s < p.rows - 17) or (1,), batches)

    def row_properties(self, p: ToyParams, rows: properties.Rows) -> list[Property]:
        return [properties.bounded(rows, p.rows, low=p.offset, high=p.offset)]


@pytest.fixture
def toy():
    registry.register(ToyEncoding(), "a constant offset added to x (a test's toy encoding)")
    yield registry.get_encoding("toy-offset")
    registry.ENCODINGS.pop("toy-offset", None)


def test_a_registered_toy_encoding_is_listed_built_and_checked(toy):
    assert toy in registry.list_encodings() and "constant offset" in registry.summary("toy-offset")
    for source in export.SOURCES:
        art = export.build("toy-offset", {"d_model": 4}, dtype="float16", source=source)
        assert art.manifest["encoding"] == "toy-offset"
        report = conforms(art)
        assert {p.property for p in report.properties} == {"bounded", properties.RAISES_PAST_LIMIT}


def test_a_registered_toy_encoding_is_benchmarked(toy):
    from posexport import bench

    cfg = bench.BenchConfig(encodings=("toy-offset",), params={"d_model": 4}, backends=("portable",), seqs=(8,), warmup=1, repeats=2)
    result = bench.run_bench(cfg)
    timed = [r for r in result.rows if r.encoding == "toy-offset" and r.kind == "backend"]
    assert timed and all(r.median_ms > 0 for r in timed)


def test_the_toy_is_gone_after_its_test():
    assert "toy-offset" not in registry.ENCODINGS
