"""Context extension as one command: an onnxruntime-genai folder of the suite's trained Llama (caches of 256 rows,
its context_length 256) extended to 1024 positions with YaRN (factor 4 over the 256 trained ones), by the scaling
given on the command line or by an edited config. The extended folder is held against transformers configured with
the same YaRN: onnxruntime-genai's generator decodes past the old limit, greedy, the tokens transformers picks, and
model-parity past the old limit passes in float64, where transformers without the YaRN fails. What cannot follow a
longer limit is refused by name. The same at 4096 → 16384 with model-parity at 12000 tokens is `make extend-context`
(benchmarks/extend-context.md)."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from zoo import exporters as ef
from . import trained_fixtures as tf
from .conftest import posexport_cli as cli

pytest.importorskip("onnxruntime_genai")
pytest.importorskip("tokenizers")
OLD, NEW = tf.MAX_POSITIONS, 4 * tf.MAX_POSITIONS
YARN = ("--scaling", "yarn", "--factor", "4", "--original-max-positions", str(OLD))


def exported() -> Path:
    try:
        return tf.export("llama", "genai-fp32")
    except ef.ExporterMissing as e:
        pytest.skip(str(e))


@functools.lru_cache(maxsize=None)
def yarn_folder() -> Path:
    """The trained model with its config edited to YaRN over NEW positions: what transformers is configured with."""
    return tf.variant("llama", f"yarn-{NEW}", NEW, rope_type="yarn", factor=4.0, original_max_position_embeddings=OLD)


@functools.lru_cache(maxsize=None)
def extended() -> Path:
    out = tf.ROOT / "extended" / "model.onnx"
    proc = cli("patch", exported(), "--out", out, "--from-model", tf.trained("llama"), "--position-limit", NEW, *YARN)
    assert proc.returncode == 0, proc.stderr
    assert "rescaled: it held" in proc.stdout and f'"position_limit": {OLD}' in proc.stdout, proc.stdout
    return out


def test_the_folder_lengths_follow_and_genai_decodes_past_the_old_limit():
    config = json.loads((extended().parent / "genai_config.json").read_text())
    assert config["model"]["context_length"] == NEW and config["search"]["max_length"] == NEW
    prompt = tf.tokenizer().encode(tf.TEXT.read_text()).ids[:OLD + 44]
    with pytest.raises(Exception, match="context_length"):
        tf.genai_greedy(exported().parent, prompt, 16)  # the original refuses a prompt past its 256 positions
    assert tf.genai_greedy(extended().parent, prompt, 16) == tf.greedy(yarn_folder(), prompt, 16)


def test_model_parity_past_the_old_limit_against_transformers_with_the_same_yarn(tmp_path):
    report = tmp_path / "parity.json"
    common = ("--prompt", 3 * OLD, "--text", tf.TEXT, "--runtimes", "ort-cpu", "--json", report)
    proc = cli("model-parity", "--model", extended(), "--against-hf", yarn_folder(), "--generate", 8, *common)
    assert proc.returncode == 0, proc.stdout
    results = json.loads(report.read_text())["results"]
    assert max(r["comparison"]["normalised"] for r in results) < 1e-5
    # Both ways: transformers without the YaRN (the trained plain rope) is far from the extended model.
    proc = cli("model-parity", "--model", extended(), "--against-hf", tf.trained("llama"), *common)
    keys = [r["comparison"]["normalised"] for r in json.loads(report.read_text())["results"] if r["output"].endswith("key")]
    assert proc.returncode == 1 and min(keys) > 1e-2


def test_an_edited_config_gives_the_same_files_and_doctor_finds_nothing(tmp_path):
    out = tmp_path / "edited" / "model.onnx"
    proc = cli("patch", exported(), "--out", out, "--from-model", yarn_folder())
    assert proc.returncode == 0, proc.stderr
    for name in ("model.onnx", "model.onnx.data", "genai_config.json"):
        assert (out.parent / name).read_bytes() == (extended().parent / name).read_bytes(), name
    proc = cli("doctor", extended(), "--from-model", yarn_folder(), "--fail-on")
    assert proc.returncode == 0 and f"position limit {NEW} (chosen with posexport patch)" in proc.stdout


def copy_folder(model: Path, out: Path, edit) -> Path:  # noqa: ANN001
    """The genai folder with its graph edited by ``edit`` (what another export of the model would hold)."""
    shutil.copytree(model.parent, out)
    graph = onnx.load(str(model), load_external_data=False)
    edit(graph)
    onnx.save(graph, str(out / model.name))
    return out / model.name


def static_cache(graph: onnx.ModelProto) -> None:
    for value in graph.graph.input:
        if value.name.startswith("past_key_values"):
            for dim, size in zip(value.type.tensor_type.shape.dim, (1, 2, OLD, 16)):
                dim.dim_value = size


def mask_buffer(graph: onnx.ModelProto) -> None:
    graph.graph.initializer.append(onnx.helper.make_tensor("causal_mask", onnx.TensorProto.BOOL, [1, 1, OLD, OLD],
                                                           np.tril(np.ones((OLD, OLD), bool)).ravel().tolist()))


@pytest.mark.parametrize(("edit", "named"), [
    (static_cache, f"input 'past_key_values.0.key' is a static KV shape [1, 2, {OLD}, 16]: it holds {OLD} positions"),
    (mask_buffer, f"'causal_mask' is a fixed-size attention buffer [1, 1, {OLD}, {OLD}]"),
], ids=["static-kv", "attention-buffer"])
def test_what_cannot_follow_a_longer_limit_is_refused_by_name(tmp_path, edit, named):
    model = copy_folder(exported(), tmp_path / "source", edit)
    out = tmp_path / "out" / "model.onnx"
    proc = cli("patch", model, "--out", out, "--from-model", tf.trained("llama"), "--position-limit", NEW, *YARN)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1 and named in proc.stderr, proc.stderr
    assert not out.parent.exists()
    # Within the old limit nothing has to follow: the same graph is patched.
    assert cli("patch", model, "--out", out, "--from-model", tf.trained("llama")).returncode == 0


def test_a_scaling_fixed_caches_cannot_follow_is_refused_by_name(tmp_path):
    proc = cli("patch", exported(), "--out", tmp_path / "x" / "model.onnx", "--from-model", tf.trained("llama"),
               "--position-limit", NEW, "--scaling", "dynamic", "--factor", "4")
    assert proc.returncode == 2 and "cannot follow the dynamic scaling" in proc.stderr, proc.stderr


def test_a_dynamo_export_is_extended_with_yarn_per_call(tmp_path):
    """torch.onnx dynamo's per-call frequencies (a tiny Llama of 64 positions) rebuilt with YaRN over 256: the model is
    transformers with that YaRN past the old limit, in float64; the export, plain rope there, is not."""
    from . import surgery_fixtures as sf

    folder = sf.tiny_llama("torch-default", "default")
    model = sf.torch_export(folder)
    yarn = tmp_path / "yarn"
    shutil.copytree(folder, yarn)
    config = json.loads((yarn / "config.json").read_text())
    config["rope_parameters"] = config["rope_parameters"] | {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    (yarn / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 256}))
    out = tmp_path / "extended.onnx"
    proc = cli("patch", model, "--out", out, "--from-model", folder, "--position-limit", 256, "--max-positions", 256,
               "--scaling", "yarn", "--factor", 4, "--original-max-positions", 64)
    assert proc.returncode == 0 and "rescaled: it held" in proc.stdout, proc.stderr
    report = tmp_path / "parity.json"
    proc = cli("model-parity", "--model", out, "--against-hf", yarn, "--original", model, "--prompt", 200, "--runtimes", "ort-cpu",
               "--random-ids", "--json", report)
    assert proc.returncode == 0, proc.stdout
    results = json.loads(report.read_text())["results"]
    assert max(r["comparison"]["normalised"] for r in results) < 1e-4
    proc = cli("model-parity", "--model", model, "--against-hf", yarn, "--prompt", 200, "--runtimes", "ort-cpu", "--random-ids")
    assert proc.returncode == 1
