"""The matrix's exporters: one small file each ("given a tiny model folder, export it under an output
folder and return the .onnx path, or raise ExporterFailed with a one-line reason"), most of them calling
the helpers the tests export with (tests/exporters.py), and one line here. Each runs in a
subprocess of its virtual environment's python (`venv` None: the project's own, .venv), through
``python -m matrix.exporters.run``; nothing here imports posexport, which those venvs lack."""

from __future__ import annotations

from dataclasses import dataclass


class ExporterFailed(Exception):
    """The exporter itself could not export the model; the message is its own error, in one line."""


@dataclass(frozen=True)
class Exporter:
    module: str  # matrix.exporters.<module>, defining export(model, out) -> Path
    label: str  # what the page calls it: the tool and how it was called
    venv: str | None = None  # .venvs/<venv> (scripts/exporter-venv.sh makes it), None: the project's venv
    unjudged: str = ""  # why float64 transformers cannot judge this exporter's models ("": it can)


EXPORTERS: dict[str, Exporter] = {
    "torch-dynamo": Exporter("torch_dynamo", "torch.onnx.export(dynamo=True)"),
    "torch-dynamo+ort-fusions": Exporter("ort_fusions", "torch.onnx dynamo, then onnxscript optimize_for_ort"),
    "torchscript": Exporter("torchscript", "torch.onnx.export(dynamo=False)"),
    "transformers": Exporter("transformers_onnx", "transformers 5 OnnxExporter, OnnxConfig(dynamic=True)"),
    "transformers+ort-fusions": Exporter("transformers_fused", "transformers 5 OnnxExporter, OnnxConfig(dynamic=True, ort_fusions='cpu')"),
    "genai": Exporter("genai", "onnxruntime-genai builder -p fp32 -e cpu"),
    "genai-fp16": Exporter("genai_fp16", "onnxruntime-genai builder -p fp16 -e cpu"),
    "genai-int4": Exporter("genai_int4", "onnxruntime-genai builder -p int4 -e cpu",
                           unjudged="int4 weights (MatMulNBits): the quantisation alone puts the logits ~0.7 off float64 "
                                    "transformers, so its logits are not judged against it"),
    # optimum's helper runs optimum-cli with the python of .venvs/optimum itself; mobius' runs its command
    # from .venvs/mobius, and the matrix runs its exporter file in that venv too.
    "optimum": Exporter("optimum", "optimum-cli export onnx --task text-generation-with-past (optimum-onnx 0.1, transformers 4.57, in .venvs/optimum)"),
    "mobius": Exporter("mobius", "mobius build --config DIR --dtype f32 (mobius-onnx 0.1, in .venvs/mobius)",
                       "mobius"),
}
