"""What else in a model holds its position limit, for a patch that raises it (``--position-limit`` past the rows a
site had): a past key/value input of a static shape (a static KV cache) and a fixed [L, L] attention buffer (a causal
mask of the old length) cannot follow a longer limit, so the patch is refused, naming them. The lengths a folder's
client reads (genai_config.json, optimum's config) are raised where the patch writes them (patch.py, clients.py)."""

from __future__ import annotations

import re

import onnx


from ..errors import PosexportError
from ..onnxgraph.graph import Graph

PAST_INPUT = re.compile(r"past|cache", re.IGNORECASE)  # past_key_values.0.key, input.cache.layers.0.keys


def static_kv(graph: Graph, new: int) -> list[str]:
    """Past key/value inputs whose every axis is a fixed size, their sequence axis under ``new`` positions."""
    found = []
    for value in graph.model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if not PAST_INPUT.search(value.name) or len(dims) < 3 or not all(d.HasField("dim_value") for d in dims):
            continue
        shape = [d.dim_value for d in dims]
        positions = max(shape[1:-1])  # [batch, heads, seq, dim] or [batch, seq, heads, dim]: heads are few
        if positions < new:
            found.append(f"input {value.name!r} is a static KV shape {shape}: it holds {positions} positions")
    return found


def mask_like(tensor: onnx.TensorProto, old: int) -> bool:
    """[..., old, old] as a mask is stored: boolean or bytes, or with leading axes of 1 ([1, 1, L, L]); a square
    weight matrix ([hidden, hidden], where hidden happens to be the old length) is neither."""
    dims = list(tensor.dims)
    if len(dims) < 2 or dims[-2:] != [old, old]:
        return False
    return tensor.data_type in (onnx.TensorProto.BOOL, onnx.TensorProto.UINT8) or (len(dims) > 2 and set(dims[:-2]) == {1})


def fixed_buffers(graph: Graph, old: int) -> list[str]:
    """Stored tensors that are an attention buffer (a causal mask) of the old length."""
    tensors = list(graph.model.graph.initializer) + [a.t for n in graph.model.graph.node if n.op_type == "Constant"
                                                     for a in n.attribute if a.name == "value"]
    return [f"{tensor.name or 'a Constant'!r} is a fixed-size attention buffer {list(tensor.dims)}"
            for tensor in tensors if mask_like(tensor, old)]


def check_followers(graph: Graph, old: int, new: int) -> None:
    """Refuse a limit raised from ``old`` to ``new`` positions when something else in the graph holds the old one."""
    if new <= old:
        return
    held = static_kv(graph, new) + fixed_buffers(graph, old)
    if held:
        raise PosexportError(f"--position-limit {new}: {'; '.join(held[:3])}{' …' if len(held) > 3 else ''}; it cannot "
                             f"follow the new limit (re-export with a dynamic cache and no fixed-size buffer)")


def old_limit(site_rows: list[int], max_positions: list[int]) -> int | None:
    """The limit a patch raises: the fewest rows a rebuilt site had, else the model's max positions."""
    return min(site_rows) if site_rows else (min(max_positions) if max_positions else None)


