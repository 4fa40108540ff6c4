"""Learned absolute position tables added to the token embeddings: GPT-2 (`wpe`, n_positions; GPT-SW3,
GPT-BigCode, ImageGPT, GPT-Neo alike), OPT
(`embed_positions`, max_position_embeddings + 2 rows: OPT's embedding adds 2 to the position_ids it is
given, so the graph leaves those 2 rows out and takes the model's 0-based position_ids), and the BERT
family's `position_embeddings` (absolute position_embedding_type only), whose position_ids are a buffer
the model slices or builds from input_ids:
- from 0 (BERT, ALBERT, ELECTRA, DistilBERT, XLM, CANINE, the text towers of CLIP, SigLIP, OWL-ViT, …,
  InstructBLIP's Q-Former on its instruction text);
- from padding_idx + 1 (RoBERTa, XLM-R, X-MOD, I-BERT unquantised, CamemBERT, Data2Vec-Text, Longformer, MarkupLM, …:
  create_position_ids_from_input_ids; rows 0 … padding_idx are never used);
- from 2 (MRA, Nyströmformer, YOSO: arange + 2 over max_position_embeddings + 2 rows).
The table is read from the checkpoint; the graph adds table[position_ids] to x, the model's own ids.
"""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe

FROM_ZERO, FROM_PADDING, FROM_TWO = "0", "padding_idx + 1", "2"


def bert_like(prefix: str, rows: int = 512, start: str = FROM_ZERO, table: str = "embeddings.position_embeddings"):
    """A BERT-family line: the table under `embeddings.` (or `<base_model_prefix>.embeddings.`)."""
    return (f"{table}.weight", f"{prefix}.{table}.weight"), "max_position_embeddings", rows, start


# model_type -> (the table's checkpoint names, rows key, rows default, where position_ids start)
TABLES = {
    "gpt2": (("wpe.weight", "transformer.wpe.weight"), "n_positions", 1024, FROM_ZERO),
    "gpt-sw3": (("wpe.weight", "transformer.wpe.weight"), "n_positions", 1024, FROM_ZERO),
    "gpt_bigcode": (("wpe.weight", "transformer.wpe.weight"), "n_positions", 1024, FROM_ZERO),
    "imagegpt": (("wpe.weight", "transformer.wpe.weight"), "n_positions", 1024, FROM_ZERO),
    "gpt_neo": (("wpe.weight", "transformer.wpe.weight"), "max_position_embeddings", 2048, FROM_ZERO),
    "openai-gpt": (("positions_embed.weight", "transformer.positions_embed.weight"), "n_positions", 512, FROM_ZERO),
    "opt": (("decoder.embed_positions.weight", "model.decoder.embed_positions.weight"), "max_position_embeddings", 2048,
            FROM_ZERO),
    "bert": bert_like("bert"),
    "roberta": bert_like("roberta", 512, FROM_PADDING),
    "xlm-roberta": bert_like("roberta", 512, FROM_PADDING),
    "camembert": bert_like("roberta", 512, FROM_PADDING),
    "albert": bert_like("albert"),
    "bert-generation": bert_like("bert"),
    "big_bird": bert_like("bert", 4096),
    "convbert": bert_like("convbert"),
    "distilbert": bert_like("distilbert"),
    "electra": bert_like("electra"),
    "ernie": bert_like("ernie"),
    "fnet": bert_like("fnet"),
    "megatron-bert": bert_like("bert"),
    "mobilebert": bert_like("mobilebert"),
    "rembert": bert_like("rembert"),
    "roc_bert": bert_like("roc_bert"),
    "splinter": bert_like("splinter"),
    "squeezebert": bert_like("transformer"),
    "xlm": bert_like("transformer", table="position_embeddings"),
    "flaubert": bert_like("transformer", table="position_embeddings"),
    "data2vec-text": bert_like("data2vec_text", 512, FROM_PADDING),
    "longformer": bert_like("longformer", 512, FROM_PADDING),
    "markuplm": bert_like("markuplm", 512, FROM_PADDING),
    "roberta-prelayernorm": bert_like("roberta_prelayernorm", 512, FROM_PADDING),
    "xmod": bert_like("roberta", 512, FROM_PADDING),  # RoBERTa's embeddings; its language adapters sit in the layers
    "ibert": bert_like("ibert", 512, FROM_PADDING),
    # CANINE's table from 0 has num_hash_buckets rows; its character hashing makes the token embeddings only.
    "canine": (("char_embeddings.char_position_embeddings.weight", "canine.char_embeddings.char_position_embeddings.weight"),
               "num_hash_buckets", 16384, FROM_ZERO),
    "tapas": bert_like("tapas", 1024),  # its position_ids restart at each table cell (TAPAS_CELLS)
    "xlm-roberta-xl": bert_like("roberta", 514, FROM_PADDING),
    "mra": bert_like("mra", 512, FROM_TWO),
    "nystromformer": bert_like("nystromformer", 510, FROM_TWO),
    "yoso": bert_like("yoso", 4096, FROM_TWO),
    # Text towers of dual encoders (CLIP's `position_embedding`, or a BERT/RoBERTa-like table).
    "clip_text_model": bert_like("text_model", 77, table="embeddings.position_embedding"),
    "clipseg_text_model": bert_like("text_model", 77, table="embeddings.position_embedding"),
    "metaclip_2_text_model": bert_like("text_model", 77, table="embeddings.position_embedding"),
    "xclip_text_model": bert_like("text_model", 77, table="embeddings.position_embedding"),
    "aimv2_text_model": bert_like("text_model", 77, table="embeddings.position_embedding"),
    "siglip_text_model": bert_like("text_model", 64, table="embeddings.position_embedding"),
    "siglip2_text_model": bert_like("text_model", 64, table="embeddings.position_embedding"),
    "owlvit_text_model": bert_like("owlvit", 16, table="text_model.embeddings.position_embedding"),
    "owlv2_text_model": bert_like("owlv2", 16, table="text_model.embeddings.position_embedding"),
    "groupvit_text_model": bert_like("groupvit", 77, table="text_model.embeddings.position_embedding"),
    "chinese_clip_text_model": bert_like("text_model"),
    "blip_text_model": bert_like("text_decoder.bert"),
    "align_text_model": bert_like("text_model"),
    "flava_text_model": bert_like("text_model"),
    "altclip_text_model": bert_like("text_model", 514, FROM_PADDING, table="roberta.embeddings.position_embeddings"),
    "bridgetower_text_model": bert_like("text_model", 514, FROM_PADDING),
    "clap_text_model": bert_like("text_model", 514, FROM_PADDING),
    # InstructBLIP's Q-Former: the table is added to its instruction text's tokens (its learned query tokens are not positions).
    "instructblip_qformer": bert_like("qformer"),
    "instructblipvideo_qformer": bert_like("qformer"),
}
# Notes beyond the BERT family's (what else the embeddings module does around the table).
EMBEDDING_NOTES = dict.fromkeys(("instructblip_qformer", "instructblipvideo_qformer"), (
    "x is the instruction text's token embeddings alone: the Q-Former's query embeddings (learned query tokens, not "
    "positions) are concatenated before them after the rows are added, then LayerNorm, outside this graph",
    "position_ids are 0-based (past length + token index)"))
OPT_OFFSET = 2
TAPAS_CELLS = ("position_ids restart at each table cell (reset_position_index_per_cell): TapasEmbeddings makes them "
               "min(max_position_embeddings − 1, token index − the index of its cell's first token), cells from "
               "token_type_ids' column and row ids; pass those")
# Settings under which the embeddings add something other than the table's rows: refused by name.
REFUSED = {"ibert": ("quant_mode", "I-BERT's quantised embeddings round the table's rows and their sums (QuantEmbedding, "
                                   "QuantAct); posexport reads its float form (quant_mode false)")}
# Encoder-decoder (and BioGPT, TrOCR, PP-FormulaNet's text model: decoder-only) tables `embed_positions` under these parts, each its
# own role: model_type -> (parts, rows key per part, rows default per part, rows before position 0).
# <X>LearnedPositionalEmbedding adds that offset to the 0-based positions itself (BART's 2; none for
# Blenderbot, LED, BigBird-Pegasus); the graph leaves those rows out and takes 0-based position_ids.
BART_LIKE = {
    "bart": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (1024, 1024), 2),
    "mbart": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (1024, 1024), 2),
    "plbart": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (1024, 1024), 2),
    "mvp": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (1024, 1024), 2),
    "bigbird_pegasus": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (4096, 4096), 0),
    "blenderbot": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (128, 128), 0),
    "blenderbot-small": (("encoder", "decoder"), ("max_position_embeddings",) * 2, (512, 512), 0),
    "led": (("encoder", "decoder"), ("max_encoder_position_embeddings", "max_decoder_position_embeddings"),
            (16384, 1024), 0),
    "biogpt": (("",), ("max_position_embeddings",), (1024,), 2),
    "trocr": (("decoder",), ("max_position_embeddings",), (512,), 2),
    "pp_formulanet_text": (("",), ("max_position_embeddings",), (2560,), 2),  # PP-FormulaNet's BART-like decoder
}
# Tables that are the only position key (no position_embedding_type): decoders and CLIP-style text towers.
TABLE_ONLY = ("gpt2", "gpt-sw3", "gpt_bigcode", "imagegpt", "gpt_neo", "openai-gpt", "opt", "clip_text_model",
              "clipseg_text_model", "metaclip_2_text_model", "xclip_text_model", "aimv2_text_model", "siglip_text_model",
              "siglip2_text_model", "owlvit_text_model", "owlv2_text_model", "groupvit_text_model")
CONTRACT = "x is the token embeddings [batch, seq, hidden]; the graph adds the trained position row"


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture in BART_LIKE:
        return bart_like(cfg)
    keys, rows_key, rows_default, start = TABLES[cfg.architecture]
    if cfg.architecture in REFUSED and cfg.get(REFUSED[cfg.architecture][0], False):
        cfg.fail(REFUSED[cfg.architecture][0], True, REFUSED[cfg.architecture][1])
    if cfg.architecture == "canine":
        cfg.ignore("max_position_embeddings")  # sizes its position_ids buffer only; the table has num_hash_buckets rows
    cells = cfg.architecture == "tapas" and cfg.get("reset_position_index_per_cell", True)
    cfg.ignore("positive_label_weight")  # TAPAS's cell-selection loss weight ("posit" by chance)
    rows = cfg.number(rows_key, rows_default, integer=True) + (2 if start == FROM_TWO else 0)
    offset = OPT_OFFSET if cfg.architecture == "opt" else 0
    if cfg.architecture in TABLE_ONLY:
        cfg.ignore("n_ctx")  # GPT-2's context, the same number as n_positions in published configs
        notes: tuple[str, ...] = (CONTRACT, "position_ids are 0-based (with left padding, cumsum(attention_mask) − 1)")
        if offset:
            notes += (f"OPT's table has {offset} rows before position 0 (OPTLearnedPositionalEmbedding.offset); "
                      "the graph leaves them out, so it takes OPT's position_ids unchanged",)
    else:
        kind = cfg.get("position_embedding_type", "absolute")
        if kind != "absolute":
            cfg.fail("position_embedding_type", kind, "only absolute position tables are in posexport's catalogue")
        notes = EMBEDDING_NOTES.get(cfg.architecture, (CONTRACT, "token_type embeddings and LayerNorm come after, outside this graph"))
    if start == FROM_PADDING:
        pad = cfg.number("pad_token_id", 1, integer=True)
        notes += (f"position_ids start at padding_idx + 1 = {pad + 1} (create_position_ids_from_input_ids); "
                  f"rows 0 … {pad} belong to padding",)
    elif start == FROM_TWO:
        notes += ("position_ids start at 2 (the model's position_ids buffer is arange + 2); rows 0 and 1 are never used",)
    notes += (TAPAS_CELLS,) if cells else ()
    path, key = cfg.locate(keys)
    values = {"weights": str(path), "key": key, "max_positions": rows, "row_offset": offset}
    # Used once, on the input embeddings (no attention layer): the role has no layers.
    return [Role("learned", "learned", values, (), notes, LearnedRecipe(key=key, opt=bool(offset)))]


def table_keys(part: str) -> tuple[str, ...]:
    """A part's `embed_positions` in a whole checkpoint, as the base model, under `model.`, or as a
    multimodal model's language model (Florence-2's BART)."""
    path = f"{part}.embed_positions.weight" if part else "embed_positions.weight"
    return path, f"model.{path}", f"biogpt.{path}", f"model.language_model.{path}", f"language_model.{path}"


def bart_like(cfg: ModelConfig) -> list[Role]:
    parts, rows_keys, defaults, offset = BART_LIKE[cfg.architecture]
    cfg.ignore("scale_embedding")  # scales the token embeddings, not the positions
    if cfg.get("use_learned_position_embeddings", True) is not True:  # TrOCR's switch to sinusoids
        cfg.fail("use_learned_position_embeddings", cfg.get("use_learned_position_embeddings"),
                 "only the learned table is read; TrOCR's sinusoidal positions are not")
    roles = []
    for part, rows_key, default in zip(parts, rows_keys, defaults):
        path, key = cfg.locate(table_keys(part))
        values = {"weights": str(path), "key": key, "max_positions": cfg.number(rows_key, default, integer=True),
                  "row_offset": offset}
        notes = (CONTRACT, f"position_ids are 0-based (the {part or 'model'}'s own: past length + token index)",
                 *((f"the table has {offset} rows before position 0 (the model's positional embedding adds "
                    f"{offset}); the graph leaves them out",) if offset else ()))
        roles.append(Role(f"learned-{part}" if part else "learned", "learned", values, (), notes,
                          LearnedRecipe(key=key, offset=offset)))
    return roles


FAMILY = Family((*TABLES, *BART_LIKE), read, "learned table")
