"""GPT-NeoX / Pythia and StableLM: partial rotary on the leading channels of each head, half-split pairs.

GPT-NeoX is read as transformers reads it: `rotary_pct` (default 0.25) and `rotary_emb_base` (default
10000), or a transformers-5 `rope_parameters` holding rope_theta and partial_rotary_factor. transformers
ignores a top-level `rope_theta` or `partial_rotary_factor` in a GPT-NeoX config, so they are an error
here rather than a guess. StableLM: partial_rotary_factor (default 0.25) and rope_theta.
"""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import heads_and_dim, hf_rope, rope_role
from .rope_reading import rope_values, top_block


def read(cfg: ModelConfig) -> list[Role]:
    heads, head_dim = heads_and_dim(cfg)
    name, block = top_block(cfg)
    if cfg.architecture == "gpt_neox":
        for key in ("rope_theta", "partial_rotary_factor"):
            if cfg.has(key):
                cfg.fail(key, cfg.get(key), "transformers' gpt_neox ignores it at the top level; "
                                            "GPT-NeoX says rotary_emb_base and rotary_pct")
        theta, partial = cfg.number("rotary_emb_base", 10000.0), cfg.number("rotary_pct", 0.25)
        hf = hf_rope("gpt_neox.modeling_gpt_neox", "GPTNeoXRotaryEmbedding")
        cfg.ignore("use_parallel_residual")
    else:
        theta, partial = cfg.number("rope_theta", 10000.0), cfg.number("partial_rotary_factor", 0.25)
        hf = hf_rope("stablelm.modeling_stablelm", "StableLmRotaryEmbedding", split=True)
    values = rope_values(cfg, block, head_dim=head_dim, heads=heads, block_name=name, theta=theta, partial=partial,
                         max_positions=cfg.number("max_position_embeddings", 2048 if cfg.architecture == "gpt_neox" else 4096, integer=True))
    note = f"only the first {values['rotary_dim']} of {head_dim} channels rotate; the rest pass through"
    return [rope_role(values, cfg, hf, notes=(note,))]


FAMILY = Family(("gpt_neox", "stablelm"), read, "rope (partial)")
