"""GPT-J (`gptj`) and CodeGen (`codegen`): rope on the first `rotary_dim` channels of each head (default
64), interleaved pairs (2i, 2i + 1) (rotate_every_two), base 10000, head_dim = n_embd // n_head. Their
attention takes sin/cos rows of `create_sinusoidal_positions` at position_ids; the `hf` runtime runs
those two functions of the model's module."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import CONTRACT
from .rope_reading import rope_values

THETA = 10000.0  # create_sinusoidal_positions' fixed base


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.number("n_head", 16, integer=True)
    cfg.ignore("n_ctx")  # CodeGen's context, the same number as n_positions; rope does not read it
    head_dim = cfg.number("n_embd", 4096, integer=True) // heads
    rotary = cfg.number("rotary_dim", 64, integer=True)
    if not 2 <= rotary <= head_dim or rotary % 2:
        cfg.fail("rotary_dim", rotary, f"expected an even number of channels in [2, head_dim = {head_dim}]")
    values = rope_values(cfg, None, head_dim=head_dim, heads=heads, theta=THETA, pair_layout="interleaved",
                         max_positions=cfg.number("n_positions", 2048, integer=True), partial=rotary / head_dim)
    values["rotary_dim"] = rotary
    module = {"gptj": "gptj", "codegen": "codegen"}[cfg.architecture]
    hf = {"kind": "gptj", "module": f"transformers.models.{module}.modeling_{module}",
          "create": "create_sinusoidal_positions", "apply": "apply_rotary_pos_emb"}
    note = f"pairs (2i, 2i+1) of the first {rotary} of {head_dim} channels rotate; the rest pass through"
    layers = tuple(range(cfg.number("n_layer", 0, integer=True)))
    return [Role("rope", "rope", values, layers, (CONTRACT, note), hf)]


FAMILY = Family(("gptj", "codegen"), read, "rope (partial, interleaved pairs)")
