"""Multi-head latent attention (DeepSeek-V2 / V3 and the models built on its attention): rope on the
qk_rope_head_dim channels of each head only (q_pe, k_pe; the qk_nope_head_dim channels carry no position),
usually YaRN with mscale/mscale_all_dim.

Pair order: V2 rotates adjacent pairs (2i, 2i + 1) as complex numbers (interleaved); V3 with
`rope_interleave` (the default) de-interleaves those pairs to (i, i + n) and rotates half-split: the graph
does the same (`deinterleave`: interleaved pairs in, half-split out), so its q_pe/k_pe are the model's
channel for channel. V3 without rope_interleave is plain half-split. LongCat-Flash always de-interleaves
(no switch), MiniCPM3 never. Outside this graph the model multiplies its softmax scale by mscale(factor,
mscale_all_dim)² for YaRN: that is the attention scale, not a position.

Bailing-Hybrid de-interleaves as V3 on its full_attention layers only (its linear_attention layers carry no
rope); HY-V4 rotates half-split, and its DSA indexer rotates its index heads' last qk_rope_head_dim channels
with the same rope.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import rope_values, top_block

SWITCH, ALWAYS, NEVER = "rope_interleave", "always", "never"


@dataclass(frozen=True)
class Mla:
    module: str  # transformers.models.<module>.modeling_<module>
    prefix: str  # <prefix>RotaryEmbedding
    max_positions: int  # the config class's max_position_embeddings default
    theta: float
    deinterleave: str = SWITCH  # SWITCH: the config's rope_interleave (default true) chooses; ALWAYS; NEVER
    # Bailing-Hybrid: MLA on the full_attention layers only (default every layer_group_size-th, 6), gated-delta
    # linear_attention layers without rope between them; its head_dim sizes those linear heads, its
    # max_position_embeddings is spelled model_max_length.
    linear_hybrid: bool = False
    notes: tuple[str, ...] = ()


# model_type -> its line (deepseek_v2: complex pairs, read below). V3's attention, copied or reused.
MLA = {
    "deepseek_v3": Mla("deepseek_v3", "DeepseekV3", 4096, 10000.0),
    "sarvam_mla": Mla("deepseek_v3", "DeepseekV3", 4096, 10000.0),
    "glm4_moe_lite": Mla("glm4_moe_lite", "Glm4MoeLite", 202752, 10000.0),
    "youtu": Mla("youtu", "Youtu", 131072, 10000.0),
    "axk1": Mla("axk1", "AXK1", 32768, 10000.0),
    "longcat_flash": Mla("longcat_flash", "LongcatFlash", 131072, 10000000.0, ALWAYS),
    "minicpm3": Mla("minicpm3", "MiniCPM3", 32768, 10000.0, NEVER),
    "bailing_hybrid": Mla("bailing_hybrid", "BailingHybrid", 262144, 6000000.0, ALWAYS, linear_hybrid=True),
    "hy_v4": Mla("hy_v4", "HYV4", 262144, 10000.0, NEVER, notes=(
        "the DSA indexer rotates the last qk_rope_head_dim channels of each index head, and of its one key, with "
        "the same rope (the same graph)",)),
}


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.number("num_attention_heads", integer=True)
    rope_dim = cfg.number("qk_rope_head_dim", 32 if cfg.architecture == "minicpm3" else 64, integer=True)
    line = MLA.get(cfg.architecture)
    # head_dim in a transformers-5 config is qk_rope_head_dim again; anything else is not what transformers uses.
    if cfg.has("head_dim") and cfg.get("head_dim") != rope_dim and not (line and line.linear_hybrid):
        cfg.fail("head_dim", cfg.get("head_dim"), f"transformers replaces it by qk_rope_head_dim = {rope_dim}")
    cfg.ignore("qk_nope_head_dim", "v_head_dim", "qk_head_dim")
    interleave = True if line is None or line.deinterleave == ALWAYS else \
        False if line.deinterleave == NEVER else cfg.get("rope_interleave", True)
    name, block = top_block(cfg)
    values = rope_values(cfg, block, head_dim=rope_dim, heads=heads, block_name=name,
                         pair_layout=("deinterleave" if line else "interleaved") if interleave else "half",
                         max_positions=max_positions(cfg, line),
                         theta=cfg.number("rope_theta", line.theta if line else 10000.0))
    notes = [f"x is q_pe or k_pe: the last qk_rope_head_dim = {rope_dim} channels of each head (after the "
             "qk_nope channels); k_pe is shared by all heads (build with --heads 1 for it)"]
    if line:
        apply = "apply_rotary_pos_emb_interleave" if interleave else "apply_rotary_pos_emb"
        if interleave:
            notes.append("the model de-interleaves q_pe/k_pe channels (2i, 2i+1) -> (i, i+n) before rotating "
                         "half-split; so does the graph (pair_layout deinterleave)")
        hf = hf_rope(f"{line.module}.modeling_{line.module}", f"{line.prefix}RotaryEmbedding", apply)
        notes += line.notes
    else:
        hf = hf_rope("deepseek_v2.modeling_deepseek_v2", "DeepseekV2RotaryEmbedding", "apply_rotary_emb")
    ids = full_attention_layers(cfg) if line and line.linear_hybrid else None
    return [rope_role(values, cfg, hf, layer_ids=ids, notes=tuple(notes))]


def max_positions(cfg: ModelConfig, line: Mla | None) -> int:
    default = line.max_positions if line else 2048
    if line and line.linear_hybrid and cfg.has("model_max_length"):
        return cfg.number("model_max_length", integer=True)
    return cfg.number("max_position_embeddings", default, integer=True)


def full_attention_layers(cfg: ModelConfig) -> tuple[int, ...]:
    """Bailing-Hybrid's MLA layers: layer_types' full_attention entries, by default every layer_group_size-th."""
    count = cfg.count("num_hidden_layers", 42)
    types = cfg.get("layer_types", None)
    if types is None:
        group = cfg.count("layer_group_size", 6)
        types = ["full_attention" if (i + 1) % group == 0 else "linear_attention" for i in range(count)]
    if not isinstance(types, list) or len(types) != count or not all(isinstance(t, str) for t in types):
        cfg.fail("layer_types", types, f"expected {count} layer type names")
    return tuple(i for i, t in enumerate(types) if t == "full_attention")
