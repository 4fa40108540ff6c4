"""T5 / mT5 / Flan-T5: a bucketed relative-position bias, trained, one table per stack held by block 0 and
shared by every layer of that stack: the encoder's bidirectional, the decoder's causal (cross-attention
has none). Two graphs, `t5-encoder` and `t5-decoder`, their tables read from the checkpoint.
UMT5 trains a table in every layer: one graph per layer, `t5-encoder-<i>` and `t5-decoder-<i>`. Switch
Transformers and Pop2Piano are T5's attention copied: read as T5, checked against their own copies."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import T5Recipe

TABLE = "{stack}.block.{block}.layer.0.SelfAttention.relative_attention_bias.weight"
# model_type -> (transformers module, attention class, num_heads and num_layers defaults): T5's attention,
# copied by Switch Transformers and Pop2Piano.
FAMILIES = {"t5": ("t5.modeling_t5", "T5Attention", 8, 6), "mt5": ("t5.modeling_t5", "T5Attention", 8, 6),
            "umt5": ("umt5.modeling_umt5", "UMT5Attention", 8, 6),
            "switch_transformers": ("switch_transformers.modeling_switch_transformers", "SwitchTransformersAttention", 12, 12),
            "pop2piano": ("pop2piano.modeling_pop2piano", "Pop2PianoAttention", 8, 6)}
NOTES = ("scores are q·kᵀ of one attention layer, [batch, heads, q_len, k_len] (T5 does not scale by 1/√d); "
         "query i sits at k_len − q_len + i, as with a KV cache",)


def read(cfg: ModelConfig) -> list[Role]:
    module, attention, heads_default, layers_default = FAMILIES[cfg.architecture]
    heads = cfg.number("num_heads", heads_default, integer=True)
    common = {"heads": heads,
              "num_buckets": cfg.number("relative_attention_num_buckets", 32, integer=True),
              "max_distance": cfg.number("relative_attention_max_distance", 128, integer=True)}
    encoder_layers = cfg.number("num_layers", layers_default, integer=True)
    decoder_layers = cfg.number("num_decoder_layers", encoder_layers, integer=True)
    per_layer = cfg.architecture == "umt5"
    roles = []
    for stack, bidirectional, count in (("encoder", True, encoder_layers), ("decoder", False, decoder_layers)):
        if stack == "decoder" and cfg.get("is_encoder_decoder", True) is False:
            continue
        side = "bidirectional (encoder self-attention)" if bidirectional else "causal (decoder self-attention)"
        for block in range(count) if per_layer else (0,):
            path, key = cfg.locate((TABLE.format(stack=stack, block=block),))
            values = {**common, "bidirectional": bidirectional, "weights": str(path), "key": key}
            hf = T5Recipe(key=key, decoder=not bidirectional, module=f"transformers.models.{module}",
                            attention=attention)
            name, layers = (f"t5-{stack}-{block}", (block,)) if per_layer else (f"t5-{stack}", tuple(range(count)))
            roles.append(Role(name, "t5", values, layers, (*NOTES, side), hf))
    return roles


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "LongT5: T5 buckets inside local or transient-global attention blocks; not modelled": ("longt5",),
    "CPM-Ant: T5's bidirectional buckets only between tokens of one segment; a pair across segments (its prepended "
    "prompt tokens are segment 0, the text 2) takes a trained row per (query segment, key segment) instead "
    "(segment_types² rows after the buckets); not modelled": ("cpmant",),
}


FAMILY = Family(tuple(FAMILIES), read, "t5 bias", pending=PENDING)
