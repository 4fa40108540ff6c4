"""A learned patch-grid table resampled to the run-time grid: ViT exported with ``interpolate_pos_encoding``
(transformers: the [1, Gh·Gw, dim] table reshaped to [1, Gh, Gw, dim], transposed to [1, dim, Gh, Gw],
``F.interpolate(size=(h, w), mode="bicubic", align_corners=False)``, exported as ONNX Resize(cubic)).

The doctor runs the model's own Resize node (its attributes, onnxruntime CPU) on the trained grid at other
grids and compares it with posexport's float64 resample (the vit-learned encoding's reference:
transformers' plain bicubic, Keys a = −0.75, half-pixel centres, clamped edges). Patch leaves it alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.helper as oh

from ..encodings.vit_learned import resample_grid
from ..errors import one_line
from ..onnxgraph.graph import Graph, attribute, node_label
from .sites import Fault, RefusedKind, Site

# What transformers' ViT computes: torch's bicubic (a = −0.75) without antialiasing.
TORCH_BICUBIC = -0.75
# A resample within this of float64 (relative to the table's largest entry) is float32 rounding.
RESAMPLE_FAULT = 1e-5


def trained_grid(graph: Graph, resize: onnx.NodeProto) -> tuple[str, np.ndarray] | None:
    """(table name, grid [Gh, Gw, dim] float64) of Resize(Transpose(0, 3, 1, 2)(Reshape(table [1?, G², dim])))."""
    transpose = graph.producer.get(resize.input[0])
    if transpose is None or transpose.op_type != "Transpose" or list(attribute(transpose, "perm", [])) != [0, 3, 1, 2]:
        return None
    reshape = graph.producer.get(transpose.input[0])
    if reshape is None or reshape.op_type != "Reshape":
        return None
    table = graph.array(reshape.input[0])
    if table is None or table.dtype.kind != "f" or table.ndim not in (2, 3):
        return None
    rows, dim = table.shape[-2:]
    side = int(round(rows ** 0.5))
    if side * side != rows or (table.ndim == 3 and table.shape[0] != 1):
        return None
    return reshape.input[0], table.reshape(side, side, dim).astype(np.float64)


def run_resize(resize: onnx.NodeProto, grid: np.ndarray, h: int, w: int, opset: int) -> np.ndarray:
    """The node (its attributes) run by onnxruntime on the grid [1, dim, Gh, Gw] to (h, w): [h, w, dim]."""
    import onnxruntime as ort

    node = oh.make_node("Resize", ["x", "", "", "sizes"], ["y"], **{a.name: oh.get_attribute_value(a) for a in resize.attribute})
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)
    sizes = oh.make_tensor_value_info("sizes", onnx.TensorProto.INT64, [4])
    graph = oh.make_graph([node], "resize", [x, sizes], [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", max(opset, 13))])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x_value = np.ascontiguousarray(grid.transpose(2, 0, 1)[None], dtype=np.float32)
    return session.run(None, {"x": x_value, "sizes": np.array([1, grid.shape[2], h, w], dtype=np.int64)})[0][0].transpose(1, 2, 0)


def checked_grids(side: int) -> list[tuple[int, int]]:
    """The trained grid, one row and column more, non-square, twice as large, smaller."""
    return [(side, side), (side + 1, side + 1), (side + 1, side + 3), (2 * side, 2 * side - 1), (max(1, side - 1), side)]


class GridResampleKind(RefusedKind):
    name = "grid-resample"
    summary = "a learned patch-grid table resampled in the graph (ViT with interpolate_pos_encoding)"

    def match(self, graph: Graph) -> list[Site]:
        sites = []
        for node in graph.model.graph.node:
            if node.op_type != "Resize" or node.domain not in ("", "ai.onnx"):
                continue
            found = trained_grid(graph, node)
            if found is None:
                continue
            table, grid = found
            recovered = {"table": table, "trained_grid": f"{grid.shape[0]}×{grid.shape[1]}", "dim": int(grid.shape[2]),
                         "mode": attribute(node, "mode", b"nearest").decode(), "cubic_coeff_a": attribute(node, "cubic_coeff_a", -0.75),
                         "coordinates": attribute(node, "coordinate_transformation_mode", b"half_pixel").decode(),
                         "antialias": bool(attribute(node, "antialias", 0))}
            sites.append(Site(self.name, node_label(node), [c.name for c in graph.consumers.get(node.output[0], [])], recovered,
                              {"resize": node, "grid": grid}))
        return sites

    def refusal(self, site: Site) -> str:
        return "a trained grid resampled per call; posexport build --encoding vit-learned is the exact replacement"

    def diagnose(self, graph: Graph, site: Site, rope: Any, context: dict[str, Any]) -> None:
        grid = site.tensors["grid"]
        scale = max(1.0, float(np.max(np.abs(grid))))
        errors = {}
        for h, w in checked_grids(grid.shape[0]):
            try:
                got = run_resize(site.tensors["resize"], grid, h, w, graph.opset())
            except Exception as e:  # onnxruntime refuses the node's attributes on their own
                site.notes.append(f"resample not measured: onnxruntime cannot run the Resize alone ({one_line(str(e), 160)})")
                return
            errors[f"{h}×{w}"] = float(np.max(np.abs(got - resample_grid(grid, h, w, TORCH_BICUBIC, antialias=False)))) / scale
        site.recovered["resample_error"] = {k: float(f"{v:.3g}") for k, v in errors.items()}
        worst = max(errors, key=errors.get)
        detail = (f"resample vs float64 (torch's bicubic, a = {TORCH_BICUBIC}, no antialias) at grids {', '.join(errors)}: "
                  f"worst {errors[worst]:.2e} (relative to max|table|) at {worst}")
        if errors[worst] > RESAMPLE_FAULT:
            site.faults.append(Fault("grid-resample", detail, errors[worst]))
        else:
            site.notes.append(detail + " (float32 rounding)")
