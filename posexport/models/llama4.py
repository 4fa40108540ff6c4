"""Llama-4 (`llama4`, its `llama4_text`): rope as a complex multiply of the pairs (2i, 2i + 1) — the
interleaved layout — on the layers `no_rope_layers` marks 1, and NoPE on the others (default: every
`no_rope_layer_interval`-th layer, 4). With `attn_temperature_tuning` (default on) the NoPE layers scale q
by 1 + attn_scale·ln(1 + ⌊(p + 1)/floor_scale⌋) (defaults 0.1 and 8192), p the cache position: a
query-scale role on those layers. The rope layers' L2 qk-norm (use_qk_norm) comes after the rotation and
does not involve positions. The vision tower's own 2-D rope is not built."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import heads_and_dim, hf_rope, rope_role, text_part
from .rope_reading import rope_values, top_block

MODULE = "transformers.models.llama4.modeling_llama4"
COMPLEX = ("Llama-4 multiplies the pairs (2i, 2i+1) as complex numbers by e^(i·p·θ): the interleaved layout",
           "with use_qk_norm the model L2-normalises q and k after the rotation (outside this graph)")


def read(cfg: ModelConfig) -> list[Role]:
    text = text_part(cfg)
    heads, head_dim = heads_and_dim(text, 128)
    count = text.number("num_hidden_layers", 48, integer=True)
    interval = text.number("no_rope_layer_interval", 4, integer=True)
    flags = text.get("no_rope_layers", None) or [int((i + 1) % interval != 0) for i in range(count)]
    if not isinstance(flags, list) or len(flags) < count or set(flags) - {0, 1}:
        text.fail("no_rope_layers", flags, f"expected {count} flags, 1 where the layer uses rope and 0 for NoPE")
    rotating, nope = [i for i in range(count) if flags[i]], [i for i in range(count) if not flags[i]]
    name, block = top_block(text)
    max_positions = text.number("max_position_embeddings", 131072, integer=True)
    values = rope_values(text, block, head_dim=head_dim, heads=heads, block_name=name, max_positions=max_positions,
                         theta=text.number("rope_theta", 500000.0), pair_layout="interleaved")
    nested = text is not cfg
    hf = hf_rope("llama4.modeling_llama4", "Llama4TextRotaryEmbedding", "apply_rotary_emb", text_config=nested, bshd_apply=True)
    roles = [rope_role(values, text, hf, "rope", tuple(rotating), notes=COMPLEX)]
    if text.get("attn_temperature_tuning", True) and nope:
        beta, floor = text.number("attn_scale", 0.1), text.number("floor_scale", 8192, integer=True)
        scale = {"heads": heads, "head_dim": head_dim, "beta": float(beta), "floor_scale": floor, "offset": 1,
                 "max_positions": max_positions}
        recipe = {"kind": "llama4-temperature", "module": MODULE, "attention": "Llama4TextAttention", "layer": nope[0],
                  "text_config": nested}
        notes = ("x is the NoPE layer's q, [batch, seq, heads, head_dim]; position_ids are the cache positions "
                 "(past length + arange(seq)), as Llama-4 counts them",
                 f"q · (1 + {beta}·ln(1 + ⌊(p + 1)/{floor}⌋)): attn_temperature_tuning on the NoPE layers")
        roles.append(Role("query-scale", "query-scale", scale, tuple(nope), notes, recipe))
    if nested:
        text.check_all_read()
    return roles


FAMILY = Family(("llama4", "llama4_text"), read, "rope, interleaved pairs, NoPE layers, query-scale")
