"""The real exporters, one function each, run on the tiny models of the collection (zoo): each takes
a model folder (config.json and weights, as ``zoo.save_model`` writes them) and the folder to write into,
and returns the ONNX file it wrote. Nothing here caches: callers (session fixtures, ``make matrix``)
choose where the files live and keep them.

An exporter that is not installed raises ``ExporterMissing`` with the reason, for a pytest skip."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import VOCAB, sample_inputs

# optimum-onnx pins transformers < 4.58: it runs in a virtual environment of its own (scripts/exporter-venv.sh).
OPTIMUM_PYTHON = Path(os.environ.get("POSEXPORT_OPTIMUM_PYTHON", Path(__file__).parents[1] / ".venvs/optimum/bin/python"))
# mobius-onnx pins its own onnx and onnxscript: its command runs from its own virtual environment too.
MOBIUS = Path(os.environ.get("POSEXPORT_MOBIUS", Path(__file__).parents[1] / ".venvs/mobius/bin/mobius"))


class ExporterMissing(RuntimeError):
    """The exporter is not installed here; the message says what is missing."""


def transformers_onnx(folder: Path, out: Path, ort_fusions: str | None = None) -> Path:
    """transformers 5's own exporter (``transformers.exporters.OnnxExporter``, ``OnnxConfig(dynamic=True)``,
    optionally with onnxruntime fusions for ``ort_fusions``): out/model.onnx with export.json beside it."""
    if not (out / "model.onnx").is_file():
        exported(folder, out, lambda exporter, model, config: exporter.export(model, sample_inputs(), config), ort_fusions)
    return out / "model.onnx"


def transformers_onnx_generation(folder: Path, out: Path, ort_fusions: str | None = None, multi_token_decode: bool = False) -> Path:
    """The same exporter's ``export_for_generation``: one file per generation stage, out/prefill.onnx (the
    prompt) and out/decode.onnx (a one-token step on past key/values, or any number of tokens with
    ``multi_token_decode``), with export.json beside them; returns ``out``. It takes generate()'s inputs,
    and captures each stage's own from a short generation."""
    if not (out / "export.json").is_file():  # written last
        inputs = {k: v for k, v in sample_inputs().items() if k != "position_ids"}
        exported(folder, out, lambda exporter, model, config: exporter.export_for_generation(
            model, inputs, config, multi_token_decode=multi_token_decode), ort_fusions)
    return out


def exported(folder: Path, out: Path, export: Callable[[Any, Any, Any], Any], ort_fusions: str | None) -> None:
    """``export(exporter, model, config)`` with transformers' OnnxExporter and ``OnnxConfig(dynamic=True,
    ort_fusions=...)`` on the model of ``folder``, saved to ``out``."""
    try:
        from transformers.exporters import OnnxConfig, OnnxExporter
    except ImportError as e:
        raise ExporterMissing(f"transformers.exporters is not available ({e}); it needs transformers ≥ 5.24") from None
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export(OnnxExporter(), model, OnnxConfig(dynamic=True, ort_fusions=ort_fusions)).save_pretrained(out)


def forward_4x(self: Any, x: Any, position_ids: Any) -> tuple[Any, Any]:
    """transformers 4.57's rotary forward (LlamaRotaryEmbedding and its copies): the angles as a matrix product
    inv_freq [b, n, 1] @ position_ids [b, 1, s], where transformers 5 multiplies elementwise."""
    import torch

    inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def rotary_4x(model: Any) -> Any:
    """The model with every single-rope rotary module computing its angles as transformers 4.x did (``forward_4x``): a
    transformers-4.x-style export, from the project's transformers 5 (the 4.x environment has no onnxscript for dynamo)."""
    import types

    for module in model.modules():
        if type(module).__name__.endswith("RotaryEmbedding") and hasattr(module, "inv_freq"):
            module.forward = types.MethodType(forward_4x, module)
    return model


def torch_onnx(folder: Path, out: Path, dynamo: bool = True, position_ids: bool = True, matmul_rotary: bool = False) -> Path:
    """torch.onnx.export of the model's logits (dynamo, or the TorchScript exporter with axes named b and
    s): input_ids, attention_mask[, position_ids] -> logits, written to ``out``; with ``matmul_rotary``, its rotary
    modules compute as transformers 4.x's did (``rotary_4x``)."""
    import torch
    from transformers import AutoModelForCausalLM

    if out.is_file():
        return out
    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    model = rotary_4x(model) if matmul_rotary else model

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, position_ids=None):  # noqa: ANN001
            kwargs = {"position_ids": position_ids} if position_ids is not None else {}
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **kwargs).logits

    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    names = ["input_ids", "attention_mask", "position_ids"][: 3 if position_ids else 2]
    example = (torch.randint(0, VOCAB, (2, 8)), torch.ones(2, 8, dtype=torch.int64), torch.arange(8).expand(2, 8))[: len(names)]
    axes = {"dynamic_shapes": {n: {0: batch, 1: seq} for n in names}} if dynamo else \
        {"dynamic_axes": {n: {0: "b", 1: "s"} for n in names}, "opset_version": 18}
    out.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Logits(), example, str(out), dynamo=dynamo, input_names=names, output_names=["logits"], verbose=False, **axes)
    return out


def ort_optimized(model: Path, out: Path) -> Path:
    """onnxscript's onnxruntime fusions (``optimize_for_ort``) applied to an export, written to ``out``."""
    import onnx_ir as ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    if not out.is_file():
        fused, _ = optimize_for_ort(ir.load(str(model)))
        ir.save(fused, str(out), external_data=out.name + ".data")
    return out


def genai(folder: Path, out: Path, precision: str = "fp32") -> Path:
    """onnxruntime-genai's model builder (``-e cpu``, precision fp32, fp16, bf16 or int4): out/model.onnx (for
    Whisper, out/decoder.onnx beside out/encoder.onnx) with genai_config.json and the tokenizer beside it."""
    try:
        import onnxruntime_genai  # noqa: F401
    except ImportError:
        raise ExporterMissing("onnxruntime-genai is not installed") from None
    written = (out / "model.onnx", out / "decoder.onnx")
    if not any(path.is_file() for path in written):
        command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(folder), "-o", str(out),
                   "-p", precision, "-e", "cpu", "-c", str(out.parent / "genai-cache")]
        run(command, "onnxruntime-genai builder")
    return next((path for path in written if path.is_file()), written[0])


def optimum(folder: Path, out: Path, with_past: bool = True) -> Path:
    """``optimum-cli export onnx`` (optimum-onnx, TorchScript, task text-generation[-with-past]) run by the
    python of its own virtual environment: out/model.onnx. The folder's config is read by that
    environment's transformers 4.x."""
    if not OPTIMUM_PYTHON.is_file():
        raise ExporterMissing(f"no optimum-onnx environment at {OPTIMUM_PYTHON} (make it with `sh scripts/exporter-venv.sh optimum`)")
    if not (out / "model.onnx").is_file():
        task = "text-generation-with-past" if with_past else "text-generation"
        command = [str(OPTIMUM_PYTHON), "-m", "optimum.commands.optimum_cli", "export", "onnx", "-m", str(folder),
                   "--task", task, "--no-post-process", str(out)]
        run(command, "optimum-cli export onnx")
    return out / "model.onnx"


def mobius(folder: Path, out: Path) -> Path:
    """``mobius build --config DIR OUT --dtype f32`` (mobius-onnx, the folder's weights) run from its own
    virtual environment: out/model.onnx with its external data beside it."""
    if not MOBIUS.is_file():
        raise ExporterMissing(f"no mobius-onnx environment at {MOBIUS.parents[1]} (make it with `sh scripts/exporter-venv.sh mobius`)")
    if not (out / "model.onnx").is_file():
        run([str(MOBIUS), "build", "--config", str(folder), str(out), "--dtype", "f32"], "mobius build")
    return out / "model.onnx"


def run(command: list[str], what: str) -> None:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")



# exporter name -> (folder, out) -> onnx path, for callers that walk every exporter
EXPORTERS: dict[str, Callable[[Path, Path], Path]] = {
    "transformers-onnx": lambda f, o: transformers_onnx(f, o),
    "transformers-onnx-ort-cpu": lambda f, o: transformers_onnx(f, o, "cpu"),
    "transformers-onnx-ort-cuda": lambda f, o: transformers_onnx(f, o, "cuda"),
    "torch-dynamo": lambda f, o: torch_onnx(f, o / "model.onnx"),
    "torch-dynamo-optimize-for-ort": lambda f, o: ort_optimized(torch_onnx(f, o / "plain.onnx"), o / "model.onnx"),
    "torch-dynamo-4x-optimize-for-ort": lambda f, o: ort_optimized(torch_onnx(f, o / "plain.onnx", matmul_rotary=True), o / "model.onnx"),
    "torchscript": lambda f, o: torch_onnx(f, o / "model.onnx", dynamo=False),
    "genai-fp32": lambda f, o: genai(f, o, "fp32"),
    "genai-fp16": lambda f, o: genai(f, o, "fp16"),
    "genai-bf16": lambda f, o: genai(f, o, "bf16"),
    "genai-int4": lambda f, o: genai(f, o, "int4"),
    "optimum": optimum,
    "mobius": mobius,
}
