"""RecurrentGemma / Griffin (`recurrent_gemma`): residual blocks cycling through `block_types` (default
recurrent, recurrent, attention) over num_hidden_layers; the recurrent (RG-LRU) blocks carry order
themselves, the local-attention blocks rotate q/k half-split on the first int(head_dim ·
partial_rotary_factor) channels (default 0.5), head_dim = hidden_size // num_attention_heads (the config
class computes it so, whatever config.json says). Its rotary takes the default rope type only and has no
max_position_embeddings."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import hf_rope, rope_role
from .rope_reading import block_kind, rope_values, top_block

# The config has no trained length; any up to 65536 leaves the graph's default position_limit at 131072.
NO_TRAINED_LENGTH = 8192


def read(cfg: ModelConfig) -> list[Role]:
    heads = cfg.count("num_attention_heads", 10)
    head_dim = cfg.count("hidden_size", 2560) // heads
    cfg.ignore("head_dim", "attention_window_size")  # recomputed by the config class; a mask width
    count = cfg.count("num_hidden_layers", 26)
    kinds = cfg.get("block_types", ["recurrent", "recurrent", "attention"])
    if not isinstance(kinds, list) or not kinds or not set(kinds) <= {"recurrent", "attention"}:
        cfg.fail("block_types", kinds, "expected a list of 'recurrent' and 'attention'")
    name, block = top_block(cfg)
    if block is not None and block_kind(block) != "default":
        cfg.fail(f"{name}.rope_type", block_kind(block), "RecurrentGemma's rotary takes the default rope type only")
    values = rope_values(cfg, block, head_dim=head_dim, heads=heads, block_name=name, max_positions=NO_TRAINED_LENGTH,
                         theta=cfg.number("rope_theta", 10000.0), partial=cfg.get("partial_rotary_factor", 0.5))
    hf = hf_rope("recurrent_gemma.modeling_recurrent_gemma", "RecurrentGemmaRotaryEmbedding")
    attention = tuple(i for i in range(count) if kinds[i % len(kinds)] == "attention")
    notes = ("the local-attention blocks; the recurrent blocks carry order in their RG-LRU (no rope; it resets its state "
             "where position_ids is 0)",
             "RecurrentGemma has no max_position_embeddings: the graph covers position_limit positions")
    return [rope_role(values, cfg, hf, "rope", attention, notes)]


FAMILY = Family(("recurrent_gemma",), read, "rope (partial) on the local-attention blocks")
