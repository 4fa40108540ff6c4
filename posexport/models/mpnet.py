"""MPNet (`mpnet`): two encodings, each a form posexport already builds.
- `learned`: MPNetEmbeddings' RoBERTa-like table (max_position_embeddings rows), added to the token embeddings
  at position_ids from padding_idx + 1 (create_position_ids_from_input_ids), padding_idx fixed at 1 by the
  embeddings whatever pad_token_id says;
- `t5-encoder`: MPNetEncoder's relative bias, T5's bidirectional buckets (its relative_position_bucket is
  T5's, checked equal on every offset in ±200000), one trained table [buckets, heads] held by the encoder:
  compute_position_bias builds the bias once per forward from token indices and every layer adds it to its
  scaled scores. Its buckets are 32 and its max_distance 128, the two functions' defaults (the encoder
  passes neither); relative_attention_num_buckets only sizes the table, so any other value is refused."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family
from .hf_code import auto_config, torch_float, trained
from .learned import CONTRACT
from .plan import Role
from .recipes import LearnedRecipe, Recipe

TABLE_KEYS = ("embeddings.position_embeddings.weight", "mpnet.embeddings.position_embeddings.weight")
BIAS_KEYS = ("encoder.relative_attention_bias.weight", "mpnet.encoder.relative_attention_bias.weight")
PADDING_IDX = 1  # MPNetEmbeddings.padding_idx, not read from the config
BUCKETS, MAX_DISTANCE = 32, 128  # compute_position_bias's and relative_position_bucket's defaults
TABLE_NOTES = (CONTRACT, "LayerNorm comes after, outside this graph (MPNet has no token_type embeddings)",
               f"position_ids start at padding_idx + 1 = {PADDING_IDX + 1} (create_position_ids_from_input_ids: "
               f"MPNetEmbeddings fixes padding_idx at {PADDING_IDX}, pad_token_id aside); padding tokens take row "
               f"{PADDING_IDX}, row 0 is never used")
BIAS_NOTES = ("scores are q·kᵀ/√head_dim of one attention layer, [batch, heads, q_len, k_len] (MPNetSelfAttention adds "
              "the bias after the scaling, before the attention mask)",
              "MPNetEncoder computes the bias once per forward (compute_position_bias, from token indices 0 … seq − 1, "
              "not the embeddings' position_ids) and adds the same bias in every layer",
              "bidirectional (encoder self-attention); MPNet has q_len = k_len, the graph's query i sits at "
              "k_len − q_len + i")


def read(cfg: ModelConfig) -> list[Role]:
    buckets = cfg.count("relative_attention_num_buckets", BUCKETS)
    if buckets != BUCKETS:
        cfg.fail("relative_attention_num_buckets", buckets,
                 f"MPNetEncoder buckets relative positions into {BUCKETS} (compute_position_bias's default) whatever this "
                 f"says; a table of another size is not the one it looks up in (fewer rows fail, more are never used)")
    table_path, table_key = cfg.locate(TABLE_KEYS)
    table = {"weights": str(table_path), "key": table_key, "max_positions": cfg.count("max_position_embeddings", 512),
             "row_offset": 0}
    bias_path, bias_key = cfg.locate(BIAS_KEYS)
    bias = {"heads": cfg.count("num_attention_heads", 12), "num_buckets": BUCKETS, "max_distance": MAX_DISTANCE,
            "bidirectional": True, "weights": str(bias_path), "key": bias_key}
    layers = tuple(range(cfg.count("num_hidden_layers", 12)))
    return [Role("learned", "learned", table, (), TABLE_NOTES, LearnedRecipe(key=table_key)),
            Role("t5-encoder", "t5", bias, layers, BIAS_NOTES, MpnetBiasRecipe(key=bias_key))]


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class MpnetBiasRecipe(Recipe):
    """MPNetEncoder's own compute_position_bias, holding the checkpoint's table ``key``."""

    kind: ClassVar[str] = "mpnet-bias"

    key: str


class MpnetBiasSession(Session):
    """MPNetEncoder's own compute_position_bias, the encoder built without its layers (num_hidden_layers 0) holding
    the model's trained table. MPNet's queries are its keys (q_len = k_len): the bias of the last q_len queries
    is the last q_len rows of its k_len × k_len bias, as with a KV cache."""

    def __init__(self, artifact: Artifact, recipe: MpnetBiasRecipe, folder: Path):
        encoder_class = transformers_attr("transformers.models.mpnet.modeling_mpnet", "MPNetEncoder")
        cfg = copy.deepcopy(auto_config(folder, recipe))
        cfg.num_hidden_layers = 0
        self.encoder = encoder_class(cfg).eval()
        self.encoder.relative_attention_bias.weight.data = trained(folder, recipe.key)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        scores = torch_float(feeds["scores"])
        q_len, k_len = scores.shape[-2:]
        with torch.no_grad():
            bias = self.encoder.compute_position_bias(torch.zeros(1, k_len, 1))[:, :, k_len - q_len :]
        return (scores + bias).numpy()


FAMILY = Family(("mpnet",), read, "learned table (from padding_idx + 1 = 2), t5 bias (bidirectional, computed once, added in every layer)", sessions={MpnetBiasRecipe: MpnetBiasSession})
