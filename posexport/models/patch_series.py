"""Patch time-series encoders (`patchtst`; `patchtsmixer` with use_positional_encoding): PatchTSTPositionalEncoding
and PatchTSMixerPositionalEncoding add a [rows, d_model] parameter, the same for every channel, to each channel's
patch embeddings. positional_encoding_type "random" trains it; "sincos" fills it with Vaswani's interleaved sinusoid
less its mean, divided by 10 × its standard deviation (statistics of the whole table, so of its row count: not
posexport's sinusoidal), and freezes it. Either way the checkpoint holds the table the model adds: posexport's
learned table at position_ids 0 … rows − 1, rows = (max(context_length, patch_length) − patch_length) // patch_stride
+ 1 patches (PatchTST with use_cls_token: one row more, its class token's, first). The model takes its configured
context_length only."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe

TABLE = "encoder.positional_encoder.position_enc"
BASES = ("model",)  # the heads' (ForPrediction, ForPretraining, …) path to the model
FAMILIES = {"patchtst": (1, 1), "patchtsmixer": (8, 8)}  # model_type -> the config class's patch_length, patch_stride
KINDS = ("random", "sincos")


def patches(cfg: ModelConfig) -> int:
    patch_default, stride_default = FAMILIES[cfg.architecture]
    patch = cfg.count("patch_length", patch_default)
    return (max(cfg.count("context_length", 32), patch) - patch) // cfg.count("patch_stride", stride_default) + 1


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture == "patchtsmixer" and cfg.get("use_positional_encoding", False) is not True:
        cfg.fail("use_positional_encoding", cfg.get("use_positional_encoding", False),
                 "PatchTSMixer then adds no position code; nothing to build")
    kind = cfg.get("positional_encoding_type", "sincos")
    if kind not in KINDS:
        cfg.fail("positional_encoding_type", kind, f"transformers knows {' and '.join(KINDS)} only")
    cfg.ignore("positional_dropout")  # dropout after the addition, in training only
    cls_token = cfg.architecture == "patchtst" and cfg.get("use_cls_token", False) is True
    rows = patches(cfg) + cls_token
    path, key = cfg.locate((TABLE, *(f"{base}.{TABLE}" for base in BASES)))
    added_to = "[class token | patches]" if cls_token else "patches"
    notes = (f"x is each channel's {added_to} embeddings as [batch · channels, {rows}, d_model]; position_ids are "
             f"0 … {rows - 1}, the table's rows (the same for every channel)",
             f"positional_encoding_type {kind}: the checkpoint's table ({'trained' if kind == 'random' else 'a normalised sinusoid, frozen'}); "
             "the model takes its configured context_length only")
    return [Role("learned", "learned", {"weights": str(path), "key": key, "max_positions": rows}, (), notes,
                 LearnedRecipe(key=key))]


FAMILY = Family(tuple(FAMILIES), read, "learned table (the checkpoint's, per channel over the patches)")
