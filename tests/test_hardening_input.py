"""Hostile or careless input (issue 11, items 3, 4, 6, 7, 8 and 12): weights, configs, sizes and feeds are
refused with one line, or raise at run time, instead of building or computing something wrong."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

from posexport import export
from posexport.encodings.guards import NOT_BATCH_SEQ, OUT_OF_RANGE
from posexport.errors import PosexportError
from posexport.registry import get_encoding

from .test_parity_cli import cli


def one_error(code: int, out: str, err: str) -> str:
    """The CLI's one error line (exit 2, no traceback), joined back if the console wrapped it."""
    assert code == 2, out + err
    assert "Traceback" not in err and err.count("error:") == 1 and err.lstrip().startswith("error: "), err
    return " ".join(err.split())


# --- item 3: weights ------------------------------------------------------------------------------------


def refused(path) -> str:
    with pytest.raises(PosexportError) as e:
        get_encoding("learned").params(weights=str(path))
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"--weights {path}")
    return message


def test_weights_that_overflow_float32_are_refused_after_the_cast(tmp_path):
    path = tmp_path / "big.npy"
    np.save(path, np.full((4, 3), 1e300))  # finite in float64, inf in the float32 tables
    assert "overflows" in refused(path)


@pytest.mark.parametrize("array", [
    np.ones((4, 3), np.complex64),
    np.array(["2020-01-01"] * 12, dtype="datetime64[D]").reshape(4, 3),
    np.array([["a"] * 3] * 4),
    np.zeros((4, 3), dtype=[("a", "f4"), ("b", "f4")]),
    np.ones((4, 3), bool),
], ids=["complex", "datetime", "string", "structured", "bool"])
def test_weights_of_other_dtypes_are_refused(tmp_path, array):
    path = tmp_path / "t.npy"
    np.save(path, array)
    assert f"dtype {array.dtype}" in refused(path)


def test_object_arrays_and_pickles_are_refused_in_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    npy = tmp_path / "o.npy"
    np.save(npy, np.array([[1, 2, 3]] * 4, dtype=object), allow_pickle=True)
    assert "refused: it is a pickle" in refused(npy)

    class Payload:
        def __reduce__(self):
            return (print, ("never printed",))

    pt = tmp_path / "evil.pt"
    torch.save({"t": Payload()}, pt)
    assert "refused: it is a pickle" in refused(pt)
    with (tmp_path / "raw.pt").open("wb") as f:
        pickle.dump({"t": Payload()}, f)
    assert "refused" in refused(tmp_path / "raw.pt")
    torch.save({"t": torch.ones(4, 3, dtype=torch.complex64)}, tmp_path / "c.pt")
    assert "complex64" in refused(tmp_path / "c.pt")


# --- item 4: position_ids must be [batch, seq] of x --------------------------------------------------


GRAPHS = [
    ("learned", {"max_positions": 16, "d_model": 4}, {}),
    ("sinusoidal", {"d_model": 4}, {}),
    ("rope", {"head_dim": 8, "heads": 2}, {"backend": "portable"}),
    ("rope", {"head_dim": 8, "heads": 2}, {"backend": "ort"}),
    ("rope", {"head_dim": 8, "heads": 2, "layout": "bhsd"}, {"backend": "onnx23", "opset": 23}),
    ("rope", {"head_dim": 8, "heads": 2, "scaling": "dynamic", "factor": 2.0}, {"backend": "portable"}),
    ("learned", {"max_positions": 16, "d_model": 4}, {"source": "torch"}),
    ("sinusoidal", {"d_model": 4}, {"source": "torch"}),
    ("rope", {"head_dim": 8, "heads": 2, "layout": "bhsd"}, {"source": "torch"}),
]
WRONG = [[[1], [2]], [[1]], np.arange(6).reshape(3, 2), [[0, 1, 2, 3]] * 2]


def runners(art):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(art.model_bytes, providers=["CPUExecutionProvider"])
    yield "ort-cpu", lambda feeds: session.run(None, feeds)[0]
    if art.options.backend != "ort":  # the reference evaluator has no com.microsoft ops
        reference = ReferenceEvaluator(art.model)
        yield "reference", lambda feeds: reference.run(None, feeds)[0]


def x_of(art, batch, seq):
    (spec, *_) = art.encoding.inputs(art.params)
    sizes = {"batch": batch, "seq": seq}
    return np.ones([sizes.get(d, d) for d in spec.dims], np.float32)


@pytest.mark.parametrize("name, params, options", GRAPHS, ids=lambda v: str(v) if isinstance(v, str) else "-".join(map(str, v.values())))
def test_position_ids_not_batch_seq_of_x_raise(name, params, options):
    art = export.build(name, params, **options)
    for runtime, run in runners(art):
        assert run({"x": x_of(art, 2, 3), "position_ids": np.arange(6).reshape(2, 3)}).shape == x_of(art, 2, 3).shape
        for positions in WRONG:
            with pytest.raises(Exception) as e:
                run({"x": x_of(art, 2, 3), "position_ids": np.asarray(positions, np.int64)})
            if runtime == "ort-cpu":
                assert NOT_BATCH_SEQ in str(e.value), (runtime, positions, e.value)


@pytest.mark.parametrize("source", ["script", "torch"])
@pytest.mark.parametrize("name, params", [("learned", {"max_positions": 16, "d_model": 4}), ("sinusoidal", {"d_model": 4}),
                                          ("rope", {"head_dim": 8, "heads": 2})])
def test_a_position_out_of_range_names_position_ids_on_onnxruntime(name, params, source):
    art = export.build(name, params, source=source, backend="portable")
    (_, run), *_ = runners(art)
    for bad in (10**7, -1):
        with pytest.raises(Exception) as e:
            run({"x": x_of(art, 1, 2), "position_ids": np.array([[0, bad]], np.int64)})
        assert OUT_OF_RANGE in str(e.value)


def test_the_check_is_a_few_scalar_shape_ops():
    art = export.build("rope", {"head_dim": 8, "heads": 2}, backend="portable")
    (guard,) = [f for f in art.model.functions if f.name == "CheckPositionIds"]
    assert {n.op_type for n in guard.node} <= {"Shape", "Gather", "Constant", "Sub", "Abs", "Add", "Reshape"}
    assert len(guard.node) <= 10
    (node,) = art.model.graph.node  # still one node calling the entry function
    assert node.op_type == "Rope"


# --- items 6 and 7: config.json ---------------------------------------------------------------------------


LLAMA = {"num_attention_heads": 32, "hidden_size": 4096, "max_position_embeddings": 8192, "rope_theta": 500000.0,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}}


def build_from(tmp_path, text: str | bytes) -> str:
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    out = tmp_path / "out"
    line = one_error(*cli("build", "--from-config", str(path), "--out", str(out)))
    assert not out.exists() or not any(out.iterdir())
    return line


def with_scaling(**change) -> dict:
    return LLAMA | {"rope_scaling": LLAMA["rope_scaling"] | change}


@pytest.mark.parametrize("cfg, needle", [
    (with_scaling(factor=True), "rope_scaling.factor = true: must be a number"),
    (with_scaling(factor="2.0"), 'rope_scaling.factor = "2.0": must be a number'),
    (LLAMA | {"rope_theta": "500000"}, 'rope_theta = "500000": must be a number'),
    (LLAMA | {"max_position_embeddings": True}, "max_position_embeddings = true: must be an integer"),
    (with_scaling(factor=float("inf")), "rope_scaling.factor = inf: must be a finite number"),
    (with_scaling(factor=-2.0), "rope_scaling.factor = -2.0: must be a finite number > 0"),  # from RopeParams
    (LLAMA | {"max_position_embeddings": 10**15}, "max_position_embeddings = 1000000000000000: must be in [1, 2^31]"),
], ids=["bool", "string-factor", "string-theta", "bool-size", "inf", "negative", "huge"])
def test_config_values_are_never_coerced_and_name_their_key(tmp_path, cfg, needle):
    line = build_from(tmp_path, json.dumps(cfg))
    assert line.startswith(f"error: {tmp_path / 'config.json'}: ") and needle in line, line


@pytest.mark.parametrize("text, needle", [
    (bytes(range(256)) * 4, "not UTF-8"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (json.dumps(LLAMA | {"num_attention_heads": 0}), "num_attention_heads = 0: must be ≥ 1"),
    (json.dumps(LLAMA | {"hidden_size": "4096"}), 'hidden_size = "4096": must be an integer'),
    (json.dumps(LLAMA | {"head_dim": 1e300}), "head_dim = 1e+300: must be an integer"),
    (json.dumps(with_scaling(rope_type=["llama3"])), 'rope_scaling.rope_type = ["llama3"]: must be a string'),
    (json.dumps(with_scaling(rope_type={"a": 1})), "rope_scaling.rope_type"),
    (json.dumps(LLAMA | {"partial_rotary_factor": [0.5]}), "partial_rotary_factor"),
    (json.dumps([LLAMA]), "a model config is a JSON object"),
    ("1" * 5000, "not JSON"),
], ids=["binary", "deep", "no-heads", "string-size", "huge-float", "type-list", "type-dict", "list-factor", "list", "long-int"])
def test_from_config_never_tracebacks(tmp_path, text, needle):
    assert needle in build_from(tmp_path, text)


def test_presets_and_good_configs_still_build(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA | {"rope_theta": 500000}))  # an integer for a float key is a number
    code, out, err = cli("build", "--from-config", str(path), "--out", str(tmp_path / "out"), "--position-limit", "65536")
    assert code == 0, out + err


# --- items 8 and 12: sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize("args, option", [
    (["--encoding", "rope", "--head-dim", str(10**15)], "--head-dim"),
    (["--encoding", "rope", "--heads", str(10**15)], "--heads"),
    (["--encoding", "rope", "--max-positions", str(10**15)], "--max-positions"),
    (["--encoding", "sinusoidal", "--d-model", str(10**15)], "--d-model"),
    (["--encoding", "learned", "--max-positions", str(10**12)], "--max-positions"),
    (["--encoding", "t5", "--max-distance", str(10**12)], "--max-distance"),
    (["--encoding", "t5", "--heads", str(10**12)], "--heads"),
    (["--encoding", "alibi", "--heads", str(10**15)], "--heads"),
    (["--encoding", "swin", "--heads", str(10**12)], "--heads"),
    (["--encoding", "vit-learned", "--dim", str(10**15)], "--dim"),
    (["--encoding", "sincos-2d", "--dim", str(4 * 10**14)], "--dim"),
    (["--encoding", "rope-2d", "--head-dim", str(4 * 10**14)], "--head-dim"),
])
def test_sizes_past_the_cap_are_refused_naming_the_parameter(tmp_path, args, option):
    line = one_error(*cli("build", *args, "--out", str(tmp_path)))
    assert line.startswith(f"error: {option} ") and ("POSEXPORT_MAX_BYTES" in line or "2^31" in line), line
    assert not any(tmp_path.iterdir())


def test_the_cap_is_overridable(monkeypatch):
    learned = get_encoding("learned")
    learned.params(max_positions=1 << 16, d_model=1024)  # 512 MiB: under the default 2 GiB
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "256M")
    with pytest.raises(PosexportError, match="--max-positions 65536: the table would take about 512 MiB, over the 256 MiB"):
        learned.params(max_positions=1 << 16, d_model=1024)
    monkeypatch.setenv("POSEXPORT_MAX_BYTES", "lots")
    with pytest.raises(PosexportError, match="POSEXPORT_MAX_BYTES='lots'"):
        learned.params()


def test_parity_sweeps_extensions_and_manifests_past_the_cap(tmp_path):
    rope_path, rope_json = export.save(export.build("rope", {"head_dim": 8, "heads": 2}), tmp_path, "rope")
    line = one_error(*cli("parity", str(rope_path), "--seqs", str(10**9)))
    assert line.startswith(f"error: --seqs {10**9}: case seq{10**9}-b1 would allocate") and "POSEXPORT_MAX_BYTES" in line
    onnx_path, _ = export.save(export.build("learned", {"max_positions": 16, "d_model": 4}), tmp_path, "small")
    line = one_error(*cli("extend", str(onnx_path), "--to", str(10**12), "--out", str(tmp_path / "x")))
    assert line.startswith(f"error: --to {10**12}: ")
    manifest = json.loads(rope_json.read_text())
    manifest["params"]["heads"] = 10**12
    rope_json.write_text(json.dumps(manifest))
    with pytest.raises(PosexportError, match=f"--heads {10**12}: 64 tokens of x would take"):
        export.load(rope_path)


def test_max_positions_is_judged_as_itself():
    with pytest.raises(PosexportError, match=r"^--max-positions 1000000000000000: must be in \[1, 2\^31\]$"):
        get_encoding("rope").params(max_positions=10**15)
    p = get_encoding("rope").params(max_positions=(1 << 30) + 1)  # the default limit stops at 2^31
    assert p.position_limit == 1 << 31


def test_any_feed_past_the_cap_is_refused():
    """Sweeps are checked up front; random_normal catches what else feeds a graph (bench, properties)."""
    from posexport.dtypes import get_dtype
    from posexport.encodings.inputs import random_normal

    with pytest.raises(PosexportError, match=r"an input of shape \[1, 1000000000, 32, 128\] would take"):
        random_normal(np.random.default_rng(0), (1, 10**9, 32, 128), get_dtype("float32"))
