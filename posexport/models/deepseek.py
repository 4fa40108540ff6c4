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
rope); HY-V4 de-interleaves as LongCat-Flash does (always: transformers 5.25's apply_rotary_pos_emb_interleave;
5.24 rotated it half-split), and its DSA indexer rotates its index heads' last qk_rope_head_dim channels with the
same rope. Mistral-4 takes V3's attention with Llama-4 query scaling (a query-scale role on every
layer, q · (1 + β·ln(1 + ⌊p / original_max_position_embeddings⌋)) on all qk_nope + qk_rope channels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import ModelConfig
from .decoders import QUERY_SCALE, query_scale_role
from .family import Family, Lookup
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import block_kind, rope_values, top_block

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
    # Mistral-4: heads of qk_nope + qk_rope channels, the rope block sizing the rotary by its
    # partial_rotary_factor and carrying Llama-4 query scaling (llama_4_scaling_beta), yarn by default.
    query_scale: bool = False
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
    "mistral4": Mla("mistral4", "Mistral4", 1048576, 10000.0, query_scale=True),
    "hy_v4": Mla("hy_v4", "HYV4", 262144, 10000.0, ALWAYS, notes=(
        "the DSA indexer rotates the last qk_rope_head_dim channels of each index head, and of its one key, with "
        "the same rope (the same graph)",)),
}


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.number("num_attention_heads", integer=True)
    rope_dim = cfg.number("qk_rope_head_dim", 32 if cfg.architecture == "minicpm3" else 64, integer=True)
    line = MLA.get(cfg.architecture)
    # head_dim in a transformers-5 config is qk_rope_head_dim again; anything else is not what transformers uses.
    if cfg.has("head_dim") and cfg.get("head_dim") != rope_dim and not (line and (line.linear_hybrid or line.query_scale)):
        cfg.fail("head_dim", cfg.get("head_dim"), f"transformers replaces it by qk_rope_head_dim = {rope_dim}")
    cfg.ignore("qk_nope_head_dim", "v_head_dim", "qk_head_dim")
    interleave = True if line is None or line.deinterleave == ALWAYS else \
        False if line.deinterleave == NEVER else cfg.get("rope_interleave", True)
    name, block = top_block(cfg)
    beta = None
    if line and line.query_scale:
        block, beta = mistral4_block(cfg, name, block, rope_dim)
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
    roles = [rope_role(values, cfg, hf, layer_ids=ids, notes=tuple(notes))]
    if beta is not None:
        full = rope_dim + cfg.count("qk_nope_head_dim", 64)
        roles.append(query_scale_role(cfg, line.module, heads, full, beta, values, cfg.count("num_hidden_layers", 36)))
    return roles


def mistral4_block(cfg: ModelConfig, name: str, block: dict[str, Any] | None, rope_dim: int) -> tuple[dict[str, Any], Any]:
    """Mistral-4's rope block (its config class's yarn default when absent) without what posexport reads
    otherwise: its partial_rotary_factor, which must size the rotary to qk_rope_head_dim (the channels its
    attention rotates; head_dim, qk_nope + qk_rope unless config.json says otherwise, is what it multiplies), the
    max_position_embeddings its rope functions never read, and llama_4_scaling_beta."""
    head_dim = cfg.count("head_dim", rope_dim + cfg.count("qk_nope_head_dim", 64))
    if block is None:
        block = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 128.0, "original_max_position_embeddings": 8192,
                 "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}
    partial = block.get("partial_rotary_factor", rope_dim / head_dim)
    if block_kind(block) == "default" or int(head_dim * partial) != rope_dim:
        cfg.fail(f"{name}.partial_rotary_factor", partial, f"Mistral-4's attention rotates qk_rope_head_dim = {rope_dim} "
                 f"channels; its rotary must have as many (a scaled rope type with int({head_dim} · factor) = {rope_dim})")
    rest = {k: v for k, v in block.items() if k not in ("partial_rotary_factor", "max_position_embeddings", QUERY_SCALE)}
    if QUERY_SCALE not in block:
        cfg.fail(f"{name}.{QUERY_SCALE}", None, "Mistral-4's attention scales q by it on every layer; the config needs it")
    return rest, block[QUERY_SCALE]


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


def encodings(model_type: str, lookup: Lookup) -> str:
    line = MLA.get(model_type)
    return "rope (qk_rope_head_dim, yarn mscale)" + (", query-scale" if line is not None and line.query_scale else "")


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "multi-head latent attention with a DSA indexer that rotates its own index heads half-split beside the "
    "de-interleaved latent rope: a second rope site not read yet":
        ("deepseek_v32", "glm_moe_dsa", "axk2", "mistral_large4", "mistral_large4_text"),
    "DeepSeek-V4: compressor and indexer ropes with their own theta (compress_rope_theta) and learned "
    "position_bias tables": ("deepseek_v4",),
    "GLM-5-Next: multi-head latent attention rotating qk_rope_head_dim channels inline in its attention (no "
    "rotary class to run); not read yet": ("glm5_next", "glm5_next_text"),
}


FAMILY = Family(("deepseek_v2", *MLA), read, encodings, pending=PENDING)
