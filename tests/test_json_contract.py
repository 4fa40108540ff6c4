"""One JSON contract: every --json carries schema_version and validates against its schema in docs/schemas/ (real
outputs of the commands, tiny), and the Python API returns what the command writes (docs/api.md)."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import posexport
from posexport.verdicts import to_json

from . import json_schema
from . import surgery_fixtures as sf
from .test_parity_cli import cli

GRAPH = ["--head-dim", "8", "--heads", "2"]


def written(tmp_path: Path, *args: str, name: str = "out.json") -> dict:
    """The JSON a command writes with --json (it must exit 0)."""
    path = tmp_path / name
    code, out, err = cli(*args, "--json", str(path))
    assert code == 0, out + err
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def llama31() -> tuple[Path, Path]:
    """The README's tiny Llama-3.1 and its torch.onnx export (made once per session)."""
    folder = sf.tiny_llama31()
    return folder, sf.torch_export(folder)


def test_the_validator_can_fail():
    good = {"schema_version": 1, "graphs": [{"onnx": "a.onnx", "manifest": "a.json", "encoding": "rope", "dtype": "float32",
                                             "bytes": 10, "sha256": "0" * 64}]}
    json_schema.validate(good, "build")
    for broken in ({k: v for k, v in good.items() if k != "schema_version"}, {**good, "schema_version": 2},
                   {**good, "graphs": [{**good["graphs"][0], "bytes": "10"}]}, {**good, "graphs": [{**good["graphs"][0], "sha256": "x"}]}):
        with pytest.raises(AssertionError):
            json_schema.validate(broken, "build")


def test_build_and_list(tmp_path, llama31):
    folder, _ = llama31
    built = written(tmp_path, "build", *GRAPH, "-o", str(tmp_path / "g"))
    json_schema.validate(built, "build")
    art = posexport.build("rope", {"head_dim": 8, "heads": 2})
    assert [(g["encoding"], g["sha256"], g["bytes"]) for g in built["graphs"]] == [("rope", art.manifest["sha256"], art.manifest["bytes"])]
    from_model = written(tmp_path, "build", "--from-model", str(folder), "-o", str(tmp_path / "m"), name="model.json")
    json_schema.validate(from_model, "build")
    assert from_model == posexport.build_model(folder, tmp_path / "m")  # the same files, written again byte for byte
    for args, models in (([], False), (["--models"], True)):
        listed = written(tmp_path, "list", *args, name=f"list{models}.json")
        json_schema.validate(listed, "list")
        assert listed == posexport.listing(models=models)


def test_parity_and_model_parity(tmp_path, llama31):
    built = written(tmp_path, "build", *GRAPH, "-o", str(tmp_path / "g"))
    graph = built["graphs"][0]["onnx"]
    run = ["--runtimes", "ort-cpu", "--seqs", "1,17", "--batches", "1"]
    checked = written(tmp_path, "parity", graph, *run, name="parity.json")
    json_schema.validate(checked, "report")
    assert checked == json.loads(to_json(posexport.parity(graph, ["ort-cpu"], seqs=(1, 17), batches=(1,))))
    _, model = llama31
    whole = written(tmp_path, "model-parity", "--model", str(model), "--against", str(model), "--runtimes", "ort-cpu", name="model.json")
    json_schema.validate(whole, "report")
    assert whole == json.loads(to_json(posexport.model_parity(model, model, runtimes=["ort-cpu"])))


def test_doctor_and_patch_from_the_model_folder(tmp_path, llama31):
    """`posexport.doctor(..., from_model=)` once dropped the folder on its way, and with it the exporter's known faults."""
    folder, model = llama31
    found = written(tmp_path, "doctor", str(model), "--from-model", str(folder), name="doctor.json")
    json_schema.validate(found, "doctor")
    assert found == posexport.doctor(model, from_model=folder) and found["exporter_faults"] is not None
    out = tmp_path / "fixed" / "model.onnx"
    patched = written(tmp_path, "patch", str(model), "--from-model", str(folder), "--out", str(out), name="patch.json")
    json_schema.validate(patched, "patch")
    assert patched == posexport.patch(model, out, from_model=folder).report()
    assert patched["files"][0] == str(out) and patched["sites"][0]["params"]["scaling"] == "llama3"


def test_doctor_junit_has_a_testcase_per_site_and_a_failure_per_fault(tmp_path, llama31):
    folder, model = llama31
    junit = tmp_path / "doctor.xml"
    code, out, err = cli("doctor", str(model), "--junit", str(junit), "--json", str(tmp_path / "d.json"))
    assert code == 0, out + err
    report = json.loads((tmp_path / "d.json").read_text())
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(report["sites"]) == 1 and int(suite.get("tests")) == 1
    assert len(cases[0].findall("failure")) == report["faults"] == len(report["sites"][0]["faults"]) >= 1
    clean = tmp_path / "clean.xml"
    fixed = tmp_path / "fixed.onnx"
    assert cli("patch", str(model), "--from-model", str(folder), "--out", str(fixed))[0] == 0
    assert cli("doctor", str(fixed), "--junit", str(clean))[0] == 0
    assert ET.parse(clean).getroot().findall(".//testcase") and not ET.parse(clean).getroot().findall(".//failure")


def timing_free(report: dict) -> dict:
    """A bench report without what differs run to run: the times, their ratios and profiles, the clock and load."""
    out = copy.deepcopy(report)
    for key in ("time_utc", "load_average", "command"):
        out["meta"].pop(key, None)
    for row in out["rows"]:
        for key in ("median_ms", "iqr_ms", "min_ms", "ratio_to_copy", "profile", "model_ms", "against_ms", "model_iqr_ms",
                    "against_iqr_ms", "ratio"):
            row.pop(key, None)
    out.pop("targets", None), out.pop("target", None)
    return out


def test_bench_env_and_extend(tmp_path, llama31):
    timed = written(tmp_path, "bench", *GRAPH, "--seqs", "16", "--backends", "portable", "--warmup", "0", "--repeats", "3")
    json_schema.validate(timed, "bench")
    ours = posexport.benchmark("rope", {"head_dim": "8", "heads": "2"}, seqs=(16,), backends=("portable",), warmup=0, repeats=3)
    assert timing_free(timed) == timing_free(ours.to_dict())
    _, model = llama31
    models = written(tmp_path, "bench", "--model", str(model), "--against", str(model), "--seqs", "8", "--decode-positions", "8",
                     "--warmup", "0", "--repeats", "3", name="models.json")
    json_schema.validate(models, "bench")
    assert timing_free(models) == timing_free(posexport.benchmark_models(model, model, (8,), (8,), 1, 0, 3).as_dict())
    env = written(tmp_path, "env", name="env.json")
    json_schema.validate(env, "env")
    assert env == posexport.env() and {r["name"] for r in env["runtimes"]} >= {"ort-cpu", "ort-web-wasm", "ort-webgpu"}
    table = tmp_path / "table.npy"
    import numpy as np

    np.save(table, np.random.default_rng(0).standard_normal((8, 4)))
    code, out, _ = cli("extend", str(table), "--to", "12")
    assert code == 0 and [line.removeprefix("wrote ") for line in out.splitlines()] == \
        [str(p) for p in posexport.extend_learned(table, 12)]
