"""Helpers shared by the encoding tests: run a built graph on a runtime and
judge it against the float64 oracle (max|out − ref| / max(1, max|ref|)), with −inf masks matched exactly."""

from __future__ import annotations

import numpy as np
import pytest
import onnx
import onnx.inliner
from onnx.reference import ReferenceEvaluator

from posexport import export
from posexport.contract import Case
from posexport.errors import ParamError, UnknownOption
from posexport.registry import get_encoding

from .conftest import artifact, posexport_cli, session
from .harness import normalised_error

DTYPES = ["float32", "float16", "bfloat16"]
RUNTIMES = ["ort-cpu", "reference"]


def masked_error(out: np.ndarray, ref: np.ndarray) -> float:
    """max|out − ref| / max(1, max|ref|) over the finite entries; infinite references must be matched exactly."""
    out = np.asarray(out).astype(np.float64)
    finite = np.isfinite(ref)
    assert np.array_equal(out[~finite], ref[~finite]), "the mask (−inf entries) differs"
    assert np.all(np.isfinite(out[finite])), "a finite reference entry came out infinite or NaN"
    if not finite.any():
        return 0.0
    return normalised_error(out[finite], ref[finite])


def check_feeds(art, runtime: str, feeds: dict[str, np.ndarray], bound: float | None = None) -> float:
    """Runs the feeds, checks dtype, shape and the error bound; returns the error."""
    ref = art.encoding.reference(art.params, feeds)
    out = session(art, runtime).run(feeds)
    assert out.dtype == art.options.dtype.numpy and out.shape == ref.shape
    err = masked_error(out, ref)
    if bound is None:
        largest = art.encoding.largest_position(art.params, feeds) if art.encoding.position_scaled_tolerance else None
        bound = art.options.dtype.bound(largest)
    assert err <= bound, f"{runtime}: error {err:.3e} > bound {bound:.1e}"
    return err


def check_every_case(art, runtime: str) -> float:
    """Every case of the encoding's own sweep on one runtime, each within the dtype's bound for the
    build's dtype; returns the worst error."""
    enc, p = art.encoding, art.params
    worst = 0.0
    for index, case in enumerate(enc.cases(p)):
        feeds = enc.feeds(p, case, art.options.dtype, np.random.default_rng(index))
        ref = enc.reference(p, feeds)
        out = session(art, runtime).run(feeds)
        assert out.dtype == art.options.dtype.numpy and out.shape == ref.shape, case.label
        err = normalised_error(out, ref)
        assert err <= art.options.dtype.bound(), f"{case.label} on {runtime}: {err:.3e}"
        worst = max(worst, err)
    return worst


def check_cases_and_properties(art, runtime: str, declared: set[str] | None = None) -> None:
    """Every case of the encoding's own sweep, then every property it declares (exactly ``declared``,
    when given), on one runtime."""
    enc, p = art.encoding, art.params
    check_every_case(art, runtime)
    assert declared is None or {prop.name for prop in enc.properties(p)} == declared
    for prop in enc.properties(p):
        result = prop.check(session(art, runtime).run, p, art.options.dtype, np.random.default_rng(5))
        assert result.ok, f"{prop.name}: {result.detail} (error {result.error:.3e})"


def check_attention_shapes(art, runtime: str, shapes: list[tuple[int, int, int]], seed: int = 0) -> None:
    """An attention bias at each (batch, q_len, k_len), from the encoding's own feeds."""
    rng = np.random.default_rng(seed)
    for batch, q, k in shapes:
        feeds = art.encoding.feeds(art.params, Case("t", {"batch": batch, "q_len": q, "k_len": k}), art.options.dtype, rng)
        check_feeds(art, runtime, feeds)


def torch_build(encoding: str, dtype: str, request, params: dict):
    """The torch-source artifact: float16 from the test module's `cli_torch_float16` fixture (the CLI's
    build), other dtypes from the shared cache."""
    if dtype == "float16":
        return request.getfixturevalue("cli_torch_float16")
    return artifact(encoding, dtype=dtype, source="torch", **params)


def check_bad_params(encoding: str, values: dict, needle: str) -> None:
    """Bad parameters raise a ParamError (an option it does not take: UnknownOption) of one line that names the option."""
    with pytest.raises((ParamError, UnknownOption)) as info:
        get_encoding(encoding).params(**values)
    assert needle in str(info.value) and "\n" not in str(info.value)


def largest_intermediate(art, feeds: dict[str, np.ndarray]) -> int:
    """Elements of the largest tensor the graph builds on these feeds (every node output, functions inlined),
    measured by running the ONNX reference evaluator on the inlined graph."""
    model = onnx.inliner.inline_local_functions(art.model)
    results = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
    initializers = {i.name for i in model.graph.initializer}
    inputs = {i.name for i in model.graph.input}
    return max(np.asarray(v).size for k, v in results.items() if k not in initializers | inputs)


def cli_build(out_dir, encoding: str, *options: str):
    """`posexport build --encoding ENCODING OPTIONS` in a subprocess, loaded back with its manifest."""
    posexport_cli("build", "--encoding", encoding, *options, "--out", str(out_dir), check=True)
    return export.load(out_dir / f"{encoding}.onnx")
