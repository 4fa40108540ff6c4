"""doctor reads transformers' export metadata (what transformers 5's OnnxExporter records with each component: in
export.json beside the model, or in the ONNX file's metadata_props as `transformers_export_metadata`) and checks it
against the graph and the config, both ways: the real exports agree with it, and a metadata, graph or config that
disagrees is a fault with its numbers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest

from posexport import surgery

from zoo import exporters as ef
from . import surgery_fixtures as sf
from . import test_surgery_generation as generation

pytest.importorskip("transformers")


def exports() -> tuple[Path, Path]:
    """(transformers' export of the tiny Llama, the folder its export_for_generation wrote): the session's own, shared
    with tests/test_surgery_exporters.py and tests/test_surgery_generation.py."""
    try:
        model = ef.EXPORTERS["transformers-onnx"](generation.folder(), sf.ROOT / "x-llama-transformers-onnx")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))
    return model, generation.components(None)


def metadata_faults(model: Path) -> list[str]:
    report = surgery.doctor(model)
    assert report["export_metadata"] is not None
    return [f["detail"] for f in report["export_metadata"]["faults"]]


def edited(model: Path, out: Path, manifest=None, config=None) -> Path:  # noqa: ANN001
    """A copy of the export's folder with its export.json's metadata or its config.json edited."""
    shutil.copytree(model.parent, out)
    for name, edit in (("export.json", manifest), ("config.json", config)):
        if edit is not None:
            data = json.loads((out / name).read_text())
            edit(data)
            (out / name).write_text(json.dumps(data))
    return out / model.name


def test_real_exports_agree_with_their_metadata():
    model, generation = exports()
    report = surgery.doctor(model)
    said = report["export_metadata"]
    assert said["from"] == "export.json beside the model" and said["faults"] == []
    assert said["says"]["export_dtype"] == "float32" and said["says"]["traced"]["position_ids"] == [1, 8]
    for stage in ("prefill.onnx", "decode.onnx"):  # the decode step traced with past key/values of both layers
        assert metadata_faults(generation / stage) == [], stage


def test_metadata_that_disagrees_with_the_graph_is_a_fault_with_numbers(tmp_path):
    model, _ = exports()

    def wrong(manifest: dict) -> None:
        metadata = manifest["components"]["model"]["metadata"]
        metadata["export_dtype"] = "float16"
        metadata["kwargs"]["input_ids"]["shape"] = [2, 8]  # the graph fixes the batch at 1

    faults = metadata_faults(edited(model, tmp_path / "wrong", manifest=wrong))
    assert "export_dtype float16, the graph's logits float32" in faults
    assert any("input 'input_ids': traced as int64 [2, 8]" in f and "axis 0 2 traced where the graph fixes 1" in f for f in faults)
    report = surgery.doctor(tmp_path / "wrong" / model.name)
    assert report["faults"] >= 2 + len(surgery.doctor(model)["sites"][0]["faults"])


def test_a_config_that_disagrees_with_the_graph_and_the_metadata_is_a_fault(tmp_path):
    model, _ = exports()

    def other(config: dict) -> None:
        config |= {"num_hidden_layers": 3, "architectures": ["MistralForCausalLM"]}

    faults = metadata_faults(edited(model, tmp_path / "other", config=other))
    assert "the graph returns 4 key/value caches, the config's 3 layers 6" in faults
    assert "traced LlamaForCausalLM, the config says MistralForCausalLM" in faults


def test_metadata_in_the_onnx_file_is_read_first(tmp_path):
    model, _ = exports()
    metadata = json.loads((model.parent / "export.json").read_text())["components"]["model"]["metadata"]
    graph = onnx.load(str(model), load_external_data=False)
    graph.metadata_props.add(key="transformers_export_metadata", value=json.dumps(metadata | {"export_dtype": "bfloat16"}))
    out = tmp_path / "inside"
    shutil.copytree(model.parent, out)
    onnx.save(graph, str(out / model.name))
    report = surgery.doctor(out / model.name)
    assert report["export_metadata"]["from"] == "its metadata_props 'transformers_export_metadata'"
    assert [f["detail"] for f in report["export_metadata"]["faults"]] == ["export_dtype bfloat16, the graph's logits float32"]
