"""LayoutLM (`layoutlm`, v1): BERT's position table plus four 2-D layout tables, every one a `learned` role.
LayoutLMEmbeddings sums, before LayerNorm, the word embeddings, token_type's rows and six rows of position tables:
- `learned`: position_embeddings (max_position_embeddings rows) at position_ids from 0, as BERT's;
- `x-learned`: x_position_embeddings (max_2d_position_embeddings rows), looked up twice per token: at its box's
  left edge bbox[..., 0] and at its right edge bbox[..., 2];
- `y-learned`: y_position_embeddings, twice: at the top edge bbox[..., 1] and the bottom edge bbox[..., 3];
- `h-learned`: h_position_embeddings at the box's height bbox[..., 3] − bbox[..., 1];
- `w-learned`: w_position_embeddings at its width bbox[..., 2] − bbox[..., 0].
Each graph adds one lookup's rows to x; the model's sum is x (its word and token_type rows) passed through the
`learned` graph, the x and y graphs twice each and the h and w graphs once (in any order)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe

POSITION_ROWS, BOX_ROWS = 512, 1024  # LayoutLMConfig's max_position_embeddings, max_2d_position_embeddings
SUMMED = ("x is the embeddings so far [batch, seq, hidden]; LayoutLMEmbeddings sums the word embeddings, token_type's "
          "rows and the rows of all six position lookups (position_ids, left, top, right and bottom edges, height, "
          "width), then LayerNorm, outside these graphs: each graph adds one lookup's rows")
BOX_IDS = "bbox is [batch, seq, 4] integer (left, top, right, bottom), each in 0 … max_2d_position_embeddings − 1"
# role -> (the table under `embeddings.`, rows key, rows default, what position_ids are in the model's terms)
TABLES = {
    "learned": ("position_embeddings", "max_position_embeddings", POSITION_ROWS,
                "position_ids are 0-based (LayoutLMEmbeddings' position_ids buffer sliced to the sequence)"),
    "x-learned": ("x_position_embeddings", "max_2d_position_embeddings", BOX_ROWS,
                  "used twice: position_ids = bbox[..., 0] (each box's left edge), then bbox[..., 2] (its right edge)"),
    "y-learned": ("y_position_embeddings", "max_2d_position_embeddings", BOX_ROWS,
                  "used twice: position_ids = bbox[..., 1] (each box's top edge), then bbox[..., 3] (its bottom edge)"),
    "h-learned": ("h_position_embeddings", "max_2d_position_embeddings", BOX_ROWS,
                  "position_ids = bbox[..., 3] − bbox[..., 1] (each box's height; a negative one fails, as in the model)"),
    "w-learned": ("w_position_embeddings", "max_2d_position_embeddings", BOX_ROWS,
                  "position_ids = bbox[..., 2] − bbox[..., 0] (each box's width; a negative one fails, as in the model)"),
}


def read(cfg: ModelConfig) -> list[Role]:
    kind = cfg.get("position_embedding_type", "absolute")
    if kind != "absolute":
        cfg.fail("position_embedding_type", kind, "LayoutLM's embeddings are absolute tables (transformers 5 ignores this "
                 "key); a checkpoint trained with relative attention is not read")
    roles = []
    for role, (table, rows_key, rows_default, ids) in TABLES.items():
        path, key = cfg.locate((f"embeddings.{table}.weight", f"layoutlm.embeddings.{table}.weight"))
        values = {"weights": str(path), "key": key, "max_positions": cfg.count(rows_key, rows_default), "row_offset": 0}
        notes = (SUMMED, ids) if role == "learned" else (SUMMED, ids, BOX_IDS)
        roles.append(Role(role, "learned", values, (), notes, LearnedRecipe(key=key)))
    return roles


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "LayoutLMv2 and LayoutXLM (LayoutLMv2Model): its x/y/h/w box tables are concatenated into channel slices "
    "(coordinate_size, shape_size), its visual tokens take the 1-D table at ids restarting from 0 and the box tables "
    "at a fixed visual_bbox grid, and every layer adds a 1-D relative bias over those position_ids and a 2-D one over "
    "each box's left and bottom edges (T5's bidirectional buckets, checked equal on ±200000, but at each sample's own "
    "positions: posexport's t5 bias graph takes one position vector for the whole batch); not read yet, and its model "
    "needs detectron2 to be built": ("layoutlmv2", "layoutxlm"),
    "LayoutLMv3: its x/y/h/w box tables are concatenated into channel slices (h and w clipped to 0 … 1023), its "
    "RoBERTa-like table counts from padding_idx + 1 while its biases count from 0, its image patches add a pos_embed "
    "grid, and its 1-D and 2-D relative biases (T5's buckets, checked equal on ±200000; the 2-D one at each sample's "
    "box left and bottom edges) are summed and divided by √head_dim, a scale posexport's t5 does not apply; not read yet":
        ("layoutlmv3",),
    "UDOP: a T5-style encoder whose relative biases (relative_bias_args) add, beside T5's 1-D buckets, horizontal and "
    "vertical ones over the offsets of box centres scaled by 100 and truncated, plus x/y cell tables at its float "
    "boxes · (max_2d_position_embeddings − 1) and image patches merged into the text; not modelled": ("udop",),
    "LiLT: a RoBERTa-like table on its text stream beside a layout stream whose input is a Linear "
    "(box_linear_embeddings) of its concatenated x/y/h/w rows plus box_position_embeddings, then LayerNorm, with "
    "attention of its own; the layout stream is not a table added to x: not modelled": ("lilt",),
    "BROS: sinusoids of every token pair's box-corner offsets (bbox · bbox_scale), projected by a Linear "
    "(bbox_projection) and dotted with each query in every layer, beside a BERT table; not modelled": ("bros",),
}


FAMILY = Family(("layoutlm",), read, "learned tables, summed: BERT's (from 0), x (at the box's left and right edges), "
                                    "y (top and bottom), h (its height), w (its width)", pending=PENDING)
