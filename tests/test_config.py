"""Model config import (`--from-config`) and presets (`--preset`), in the library and from the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from posexport.rope import config
from posexport.rope.encoding import RopeEncoding
from posexport.errors import PosexportError
from posexport.rope.scaling import frequencies
from .harness import normalised_error



def run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """The `posexport` entry point in this process (the subprocess path is tested in test_cli.py)."""
    from posexport_cli.main import main

    monkeypatch.setattr("sys.argv", ["posexport", *args])
    with pytest.raises(SystemExit) as e:
        main()
    captured = capsys.readouterr()
    return e.value.code, captured.out, captured.err

LLAMA31 = {
    "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def test_llama31_config_gives_its_rope():
    assert config.rope_values(LLAMA31) == {
        "head_dim": 128, "heads": 32, "base": 500000.0, "max_positions": 131072, "scaling": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_positions": 8192,
    }


def test_rope_parameters_spelling_and_older_type_key_read_the_same():
    newer = {k: v for k, v in LLAMA31.items() if k not in ("rope_scaling", "rope_theta")}
    newer["rope_parameters"] = dict(LLAMA31["rope_scaling"], rope_theta=500000.0)
    older = dict(LLAMA31, rope_scaling={k: v for k, v in LLAMA31["rope_scaling"].items() if k != "rope_type"} | {"type": "llama3"})
    assert config.rope_values(newer) == config.rope_values(older) == config.rope_values(LLAMA31)


def test_head_dim_partial_rotary_and_plain_configs():
    cfg = {"head_dim": 64, "hidden_size": 2048, "num_attention_heads": 16, "max_position_embeddings": 2048,
           "partial_rotary_factor": 0.25, "rope_scaling": None}
    assert config.rope_values(cfg) == {"head_dim": 64, "heads": 16, "base": 10000.0, "max_positions": 2048, "rotary_dim": 16}
    assert config.rope_values(dict(cfg, rope_parameters={"rope_type": "default", "rope_theta": 1e6}))["base"] == 1e6


def test_phi3_top_level_original_length_and_legacy_su_type():
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 1024, "original_max_position_embeddings": 256,
           "rope_scaling": {"type": "su", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8}}
    values = config.rope_values(cfg)
    assert values["scaling"] == "longrope" and values["original_max_positions"] == 256
    p = RopeEncoding().params(**values)
    assert frequencies(p, 300)[1] == pytest.approx(math.sqrt(1 + math.log(4) / math.log(256)), rel=1e-15)
    # transformers lets the top-level key win over the block's (standardize_rope_params), and fills in
    # max_position_embeddings where neither is written
    values = config.rope_values({**cfg, "rope_scaling": {**cfg["rope_scaling"], "original_max_position_embeddings": 512}})
    assert values["original_max_positions"] == 256
    cfg.pop("original_max_position_embeddings")
    assert config.rope_values(cfg)["original_max_positions"] == 1024


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}},
         "rope_scaling of the llama3 scaling needs key 'low_freq_factor'"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 32}},
         "rope_scaling key 'beta_fast' is not a key of the linear scaling, which takes factor"),
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "low_freq_factor": 1.0}},
         "rope_parameters key 'low_freq_factor' is not a key of the yarn scaling"),
        ({"rope_scaling": {"rope_type": "magic", "factor": 2.0}}, "rope_scaling.rope_type 'magic'"),
        ({"rope_scaling": {"factor": 2.0}}, "rope_scaling has no rope_type (or type)"),
        ({"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 64}}, "needs key 'long_factor'"),
        ({"max_position_embeddings": None}, "missing key 'max_position_embeddings'"),
        ({"num_attention_heads": None}, "missing key 'num_attention_heads'"),
        ({"partial_rotary_factor": 1.5}, "partial_rotary_factor = 1.5: must be a number in (0, 1]"),
    ],
)
def test_config_errors_name_the_key_and_the_scaling(change, needle):
    cfg = {k: v for k, v in (LLAMA31 | change).items() if v is not None}
    if "rope_parameters" in change:
        cfg.pop("rope_scaling")
    with pytest.raises(PosexportError) as e:
        config.rope_values(cfg, "config.json")
    assert needle in str(e.value) and str(e.value).startswith("config.json: ")


def test_every_preset_parses_and_validates():
    names = config.preset_names()
    assert {"llama-2-7b", "llama-3.1-8b", "qwen2.5-7b-instruct-yarn", "phi-3-mini-128k-instruct", "vicuna-7b-v1.5-16k"} <= set(names)
    scalings = {RopeEncoding().params(**config.from_preset(n)).scaling for n in names}
    assert {"default", "llama3", "yarn", "longrope", "linear"} <= scalings


def test_phi3_preset_carries_its_published_factor_lists():
    p = RopeEncoding().params(**config.from_preset("phi-3-mini-128k-instruct"))
    assert (p.head_dim, p.max_positions, p.original_max_positions) == (96, 131072, 4096)
    assert len(p.short_factor) == len(p.long_factor) == 48
    assert p.long_factor[0] == pytest.approx(1.03, abs=1e-6) and p.long_factor[-1] == pytest.approx(64.81, abs=1e-2)
    assert frequencies(p, 4097)[1] == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)), rel=1e-15)


def test_phi3_preset_passes_parity_with_its_properties(tmp_path: Path, monkeypatch, capsys):
    """`posexport build --preset phi-3-mini-128k-instruct` then `posexport parity` on it: every case and every
    property passes. Relative position is checked inside longrope's short regime (positions below L0 = 4096)
    and never shifted across L0, where the frequencies legitimately change."""
    assert run_cli(monkeypatch, capsys, "build", "--preset", "phi-3-mini-128k-instruct", "--out", str(tmp_path))[0] == 0
    report = tmp_path / "report.json"
    code, out, err = run_cli(monkeypatch, capsys, "parity", str(tmp_path / "phi-3-mini-128k-instruct.onnx"),
                             "--runtimes", "ort-cpu", "--seqs", "1,17", "--batches", "1", "--json", str(report))
    assert code == 0, out + err
    properties = {(p["property"], p["status"]) for p in json.loads(report.read_text())["properties"]}
    assert properties == {("relative-position", "pass"), ("norm-preserved", "pass"), ("raises-past-limit", "pass")}


def test_cli_builds_a_preset_and_a_config_file(tmp_path: Path, monkeypatch, capsys):
    assert run_cli(monkeypatch, capsys, "build", "--preset", "llama-3.1-8b", "--heads", "2", "--out", str(tmp_path))[0] == 0
    manifest = json.loads((tmp_path / "llama-3.1-8b.json").read_text())
    assert manifest["params"]["scaling"] == "llama3" and manifest["params"]["base"] == 500000.0
    assert manifest["params"]["heads"] == 2  # a command-line option overrides the preset's value
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA31 | {"hidden_size": 256, "num_attention_heads": 4}))
    assert run_cli(monkeypatch, capsys, "build", "--from-config", str(cfg), "--out", str(tmp_path), "--name", "mine")[0] == 0
    import onnxruntime as ort

    from posexport.rope.encoding import reference

    mine = json.loads((tmp_path / "mine.json").read_text())
    p = RopeEncoding().params(**mine["params"])
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 64)).astype(np.float32)
    pos = np.array([[8191, 8192, 100000]])
    (y,) = ort.InferenceSession(str(tmp_path / "mine.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x, "position_ids": pos})
    ref = reference(p, {"x": x, "position_ids": pos})
    assert normalised_error(y, ref) <= 1e-6 * (math.log2(100000) + 1)


def test_cli_lists_presets_and_reports_config_errors(tmp_path: Path, monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "list")
    assert code == 0
    for name in config.preset_names():
        assert name in out
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps(LLAMA31 | {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}))
    code, _, err = run_cli(monkeypatch, capsys, "build", "--from-config", str(bad), "--out", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert "llama3" in err and "'low_freq_factor'" in err
    code, _, err = run_cli(monkeypatch, capsys, "build", "--preset", "llama-4", "--out", str(tmp_path))
    assert code == 2 and "--preset 'llama-4'" in err
    code, _, err = run_cli(monkeypatch, capsys, "build", "--from-config", str(tmp_path / "absent.json"))
    assert code == 2 and "absent.json" in err


@pytest.mark.parametrize("key, value", [("rotary_pct", 0.25), ("rotary_emb_base", 10000), ("qk_rope_head_dim", 64),
                                        ("rope_local_base_freq", 10000.0)])
def test_position_keys_the_generic_reader_does_not_take_are_refused(key, value, tmp_path: Path, monkeypatch, capsys):
    """A published Pythia config (rotary_pct 0.25) once built a full-rotary graph without a word."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 2048, key: value}))
    with pytest.raises(PosexportError, match=f"{key} = .*--from-model"):
        config.from_config_file(path)
    code, _, err = run_cli(monkeypatch, capsys, "build", "--from-config", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and key in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
