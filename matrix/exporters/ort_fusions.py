"""A torch.onnx dynamo export, then onnxscript's onnxruntime fusions (optimize_for_ort)."""

from __future__ import annotations

from pathlib import Path

from .logits import export as export_logits


def export(model: Path, out: Path) -> Path:
    import onnx_ir as ir
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    plain = export_logits(model, out / "dynamo", dynamo=True)
    fused, _ = optimize_for_ort(ir.load(str(plain)))
    path = out / "model.onnx"
    ir.save(fused, str(path), external_data=path.name + ".data")
    return path
