"""Learned absolute position tables added to the token embeddings: GPT-2 (`wpe`, n_positions), OPT
(`embed_positions`, max_position_embeddings + 2 rows: OPT's embedding adds 2 to the position_ids it is
given, so the graph leaves those 2 rows out and takes the model's 0-based position_ids), BERT
(`position_embeddings`, absolute position_embedding_type only), RoBERTa / XLM-R / CamemBERT (the same
table, but the model's position_ids start at padding_idx + 1: rows 0 … padding_idx are never used).
The table is read from the checkpoint; the graph adds table[position_ids] to x."""

from __future__ import annotations

from .. import checkpoint
from .config import ModelConfig
from .plan import Role

# model_type -> (the table's checkpoint names, rows key, rows default)
TABLES = {
    "gpt2": (("wpe.weight", "transformer.wpe.weight"), "n_positions", 1024),
    "bert": (("embeddings.position_embeddings.weight", "bert.embeddings.position_embeddings.weight"),
             "max_position_embeddings", 512),
    "opt": (("decoder.embed_positions.weight", "model.decoder.embed_positions.weight"), "max_position_embeddings", 2048),
    "roberta": (("embeddings.position_embeddings.weight", "roberta.embeddings.position_embeddings.weight"),
                "max_position_embeddings", 514),
}
TABLES["xlm-roberta"] = TABLES["camembert"] = TABLES["roberta"]
OPT_OFFSET = 2
CONTRACT = "x is the token embeddings [batch, seq, hidden]; the graph adds the trained position row"


def read(cfg: ModelConfig) -> list[Role]:
    keys, rows_key, rows_default = TABLES[cfg.architecture]
    rows = cfg.number(rows_key, rows_default, integer=True)
    offset = OPT_OFFSET if cfg.architecture == "opt" else 0
    if cfg.architecture in ("gpt2", "opt"):
        cfg.ignore("n_ctx")  # GPT-2's context, the same number as n_positions in published configs
        notes: tuple[str, ...] = (CONTRACT, "position_ids are 0-based (with left padding, cumsum(attention_mask) − 1)")
        if offset:
            notes += (f"OPT's table has {offset} rows before position 0 (OPTLearnedPositionalEmbedding.offset); "
                      "the graph leaves them out, so it takes OPT's position_ids unchanged",)
    else:
        kind = cfg.get("position_embedding_type", "absolute")
        if kind != "absolute":
            cfg.fail("position_embedding_type", kind, "only absolute position tables are in posexport's catalogue")
        notes = (CONTRACT, "token_type embeddings and LayerNorm come after, outside this graph")
    if cfg.architecture not in ("gpt2", "opt", "bert"):
        pad = cfg.number("pad_token_id", 1, integer=True)
        notes += (f"position_ids start at padding_idx + 1 = {pad + 1} (create_position_ids_from_input_ids); "
                  f"rows 0 … {pad} belong to padding",)
    path, key = checkpoint.locate(cfg.folder, keys)
    values = {"weights": str(path), "key": key, "max_positions": rows, "row_offset": offset}
    # Used once, on the input embeddings (no attention layer): the role has no layers.
    return [Role("learned", "learned", values, (), notes, {"kind": "learned", "key": key, "opt": bool(offset)})]
