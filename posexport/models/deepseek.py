"""DeepSeek-V2 / V3 (multi-head latent attention): rope on the qk_rope_head_dim channels of each head only
(q_pe, k_pe; the qk_nope_head_dim channels carry no position), usually YaRN with mscale/mscale_all_dim.

Pair order: V2 rotates adjacent pairs (2i, 2i + 1) as complex numbers (interleaved); V3 with
`rope_interleave` (the default) de-interleaves those pairs to (i, i + n) and rotates half-split: the graph
does the same (`deinterleave`: interleaved pairs in, half-split out), so its q_pe/k_pe are the model's
channel for channel. V3 without rope_interleave is plain half-split. Outside this graph the model multiplies its softmax scale by mscale(factor,
mscale_all_dim)² for YaRN: that is the attention scale, not a position.
"""

from __future__ import annotations

from .config import ModelConfig
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values, top_block


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.number("num_attention_heads", integer=True)
    rope_dim = cfg.number("qk_rope_head_dim", 64, integer=True)
    # head_dim in a transformers-5 config is qk_rope_head_dim again; anything else is not what transformers uses.
    if cfg.has("head_dim") and cfg.get("head_dim") != rope_dim:
        cfg.fail("head_dim", cfg.get("head_dim"), f"transformers replaces it by qk_rope_head_dim = {rope_dim}")
    cfg.ignore("qk_nope_head_dim", "v_head_dim", "qk_head_dim")
    v3 = cfg.architecture == "deepseek_v3"
    interleave = cfg.get("rope_interleave", True) if v3 else True
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=rope_dim, heads=heads, block_name=name,
                         pair_layout=("deinterleave" if v3 else "interleaved") if interleave else "half",
                         max_positions=cfg.number("max_position_embeddings", 4096 if v3 else 2048, integer=True),
                         theta=cfg.number("rope_theta", 10000.0))
    notes = [f"x is q_pe or k_pe: the last qk_rope_head_dim = {rope_dim} channels of each head (after the "
             "qk_nope channels); k_pe is shared by all heads (build with --heads 1 for it)"]
    if v3:
        module, rotary = "deepseek_v3.modeling_deepseek_v3", "DeepseekV3RotaryEmbedding"
        apply = "apply_rotary_pos_emb_interleave" if interleave else "apply_rotary_pos_emb"
        if interleave:
            notes.append("the model de-interleaves q_pe/k_pe channels (2i, 2i+1) -> (i, i+n) before rotating "
                         "half-split; so does the graph (pair_layout deinterleave)")
        hf = hf_rope(module, rotary, apply)
    else:
        hf = hf_rope("deepseek_v2.modeling_deepseek_v2", "DeepseekV2RotaryEmbedding", "apply_rotary_emb")
    return [rope_role(values, cfg, hf, notes=tuple(notes))]
