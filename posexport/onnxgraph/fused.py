"""Fused attention and rotary ops that read cos/sin caches [rows, rotary_dim/2]: com.microsoft
GroupQueryAttention (do_rotary=1), com.microsoft RotaryEmbedding and ONNX RotaryEmbedding. Surgery finds its
cache sites by them; model-parity feeds a model that holds them."""

from __future__ import annotations

import onnx

from .graph import attribute

# op type -> (cos_cache input index, sin_cache input index, pair-layout attribute)
OPS = {
    ("com.microsoft", "GroupQueryAttention"): (7, 8, "rotary_interleaved"),
    ("com.microsoft", "RotaryEmbedding"): (2, 3, "interleaved"),
    ("", "RotaryEmbedding"): (1, 2, "interleaved"),
}


def reads_caches(node: onnx.NodeProto) -> tuple[int, int, str] | None:
    spec = OPS.get(("" if node.domain == "ai.onnx" else node.domain, node.op_type))
    if spec is None or len(node.input) <= spec[1] or not node.input[spec[0]] or not node.input[spec[1]]:
        return None
    if node.op_type == "GroupQueryAttention" and not attribute(node, "do_rotary", 0):
        return None
    return spec
