"""The exporter-aware doctor: it names the exporter that wrote a model and, given the model folder,
checks the exporters' known positional faults, each reported by name with numbers, each check shown
to fire on the fault and to stay quiet on a model without it. The exports are TorchScript ones (about
two seconds each) of tiny models whose config carries the fault as the exporter builds it, and mobius-onnx's
own (its virtual environment, else skipped); the report's JSON keeps the documented schema."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from posexport import surgery
from posexport.surgery.doctor import SCHEMA_VERSION

import zoo
from zoo import exporters as ef
from . import surgery_fixtures as sf

pytest.importorskip("transformers")
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}  # floor/ceil move the ramp here
GEMMA3_ROPES = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}


@functools.lru_cache(maxsize=None)
def model_folder(name: str) -> Path:
    from transformers import Gemma3TextConfig

    configs = {
        "dynamic": lambda: zoo.tiny_config("llama", rope_scaling=sf.SCALINGS["dynamic"]),
        "yarn": lambda: zoo.tiny_config("llama", 8192, rope_scaling=YARN),
        "yarn-unrounded": lambda: zoo.tiny_config("llama", 8192, rope_scaling=YARN | {"truncate": False}),
        "gemma3": lambda: Gemma3TextConfig(head_dim=16, max_position_embeddings=256, sliding_window=16, rope_parameters=GEMMA3_ROPES,
                                           layer_types=["sliding_attention", "full_attention"], **zoo.TINY),
        # every layer given the global rope: the local base lost, as an exporter with one rope per model builds it
        "gemma3-one-rope": lambda: Gemma3TextConfig(head_dim=16, max_position_embeddings=256, sliding_window=16,
                                                    rope_parameters=dict.fromkeys(GEMMA3_ROPES, GEMMA3_ROPES["full_attention"]),
                                                    layer_types=["sliding_attention", "full_attention"], **zoo.TINY),
        "llama3": lambda: zoo.tiny_config("llama", 2048, rope_theta=500000.0, rope_scaling=sf.SCALINGS["llama3"]),
        "llama": lambda: zoo.tiny_config("llama"),
    }
    return zoo.save_model(configs[name](), sf.ROOT / f"doctor-{name}")


@functools.lru_cache(maxsize=None)
def torchscript(folder: Path) -> Path:
    return ef.torch_onnx(folder, folder.with_name(folder.name + "-ts.onnx"), dynamo=False)


@functools.lru_cache(maxsize=None)
def mobius(folder: Path) -> Path:
    try:
        return ef.mobius(folder, folder.with_name(folder.name + "-mobius"))
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


def exporter_faults(model: Path, folder: Path) -> dict[str, dict]:
    report = surgery.doctor(model, surgery.requested_values(from_model=folder), from_model=folder)
    return {f["fault"]: f for f in report["exporter_faults"]}


def test_dynamic_ntk_built_as_plain_is_named_with_its_gap():
    folder = model_folder("dynamic")
    plain = torchscript(sf.as_plain(folder))
    fault = exporter_faults(plain, folder)["dynamic-ntk-built-as-plain"]
    assert fault["value"] > 0.1 and "position 127 of a 128-token call" in fault["detail"]
    assert "torch.onnx" in fault["known_of"]
    assert exporter_faults(plain, sf.as_plain(folder)) == {}  # the plain model held against its own config


def test_yarn_without_floor_ceil_is_named():
    unrounded = torchscript(model_folder("yarn-unrounded"))
    fault = exporter_faults(unrounded, model_folder("yarn"))["yarn-without-floor-ceil"]
    assert fault["value"] > 0.1 and fault["known_of"] == ["onnxruntime-genai"]
    assert exporter_faults(torchscript(model_folder("yarn")), model_folder("yarn")) == {}


def test_per_layer_base_lost_is_named():
    folder = model_folder("gemma3")
    fault = exporter_faults(torchscript(model_folder("gemma3-one-rope")), folder)["per-layer-base-lost"]
    assert "bases 10000 (default), 1e+06 (linear)" in fault["detail"] and fault["value"] > 0.1
    assert exporter_faults(torchscript(folder), folder) == {}


def test_exporter_is_named_and_the_report_keeps_its_schema(tmp_path):
    folder = model_folder("llama")
    model = torchscript(folder)
    out = tmp_path / "report.json"
    import posexport_cli.main as posexport_cli

    result = CliRunner().invoke(posexport_cli.app, ["doctor", str(model), "--from-model", str(folder), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "written by torch.onnx (TorchScript) 2." in result.output
    report = json.loads(out.read_text())
    assert report["schema_version"] == SCHEMA_VERSION == 1
    assert set(report) == {"schema_version", "model", "exporter", "sites", "exporter_faults", "faults"}
    assert set(report["exporter"]) == {"name", "version", "transformers", "evidence"}
    assert set(report["sites"][0]) == {"kind", "node", "feeds", "recovered", "faults", "notes"}
    assert report["exporter_faults"] == [] and report["faults"] == 1  # trig-per-call
    assert surgery.doctor(model)["exporter_faults"] is None  # without the folder, nothing to check against


def test_optimum_misreads_transformers_5_rope_parameters(tmp_path):
    folder = model_folder("llama3")
    try:
        model = ef.optimum(folder, tmp_path / "optimum")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))
    fault = exporter_faults(model, folder)["config-spelling-misread"]
    assert "transformers 4.57" in fault["detail"] and "llama3 rope, base 500000" in fault["detail"] and fault["this_exporter"]
    assert fault["value"] > 100  # the lowest frequency is 8 × 500000^… off: hundreds of times
    # optimum's own config beside the export (transformers 4.57 wrote the rope_theta it read beside the rope_parameters
    # it kept unread) says the same; the config in the spelling it understood, nothing misread.
    assert exporter_faults(model, model.parent)["config-spelling-misread"]["value"] == fault["value"]
    understood = tmp_path / "understood"
    understood.mkdir()
    config = json.loads((model.parent / "config.json").read_text())
    config.pop("rope_parameters")
    (understood / "config.json").write_text(json.dumps(config))
    assert "config-spelling-misread" not in exporter_faults(model, understood)


def test_longrope_frozen_to_one_regime_is_named():
    # Short factors of 1 make the short regime plain rope: the plain export of the same weights is LongRoPE
    # frozen to its short regime, as an exporter that fixes the regime at trace time builds it (TorchScript
    # itself cannot export transformers' LongRoPE: aten::copy).
    longrope = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.0 + 0.5 * i for i in range(8)],
                "original_max_position_embeddings": 64}
    folder = zoo.save_model(zoo.tiny_config("llama", 256, rope_scaling=longrope), sf.ROOT / "doctor-longrope")
    fault = exporter_faults(torchscript(sf.as_plain(folder)), folder)["longrope-frozen"]
    assert "frozen to its short regime (no switch at length 64)" in fault["detail"] and fault["value"] > 0.1
    # dynamo keeps the switch (a Where between the two sets of frequencies): nothing frozen
    phi3 = sf.tiny_phi3()
    assert "longrope-frozen" not in exporter_faults(sf.torch_export(phi3), phi3)


def test_mobius_dynamic_ntk_static_base_and_yarn_truncate_ignored_are_named():
    folder = model_folder("dynamic")  # dynamic NTK, factor 4, max_position_embeddings 64, base 10000, head 16
    fault = exporter_faults(mobius(folder), folder)["dynamic-ntk-built-as-plain"]
    static = float(f"{10000.0 * 4.0 ** (16 / 14):.6g}")  # NTK's base at factor 4, fixed: 10000·4^(d/(d−2))
    assert f"fixed (a fixed base {static:g})" in fault["detail"] and fault["value"] > 0.1 and fault["this_exporter"]
    loose = mobius(model_folder("yarn-unrounded"))  # the config says truncate false
    fault = exporter_faults(loose, model_folder("yarn-unrounded"))["yarn-truncate-ignored"]
    assert fault["value"] > 0.01 and fault["this_exporter"] and fault["known_of"] == ["mobius-onnx"]
    # The same graph held against the config that does truncate: it is that config's YaRN, and its caches hold the
    # 8192 positions the config promises (factor 4 × 2048): nothing to name.
    assert exporter_faults(loose, model_folder("yarn")) == {}
