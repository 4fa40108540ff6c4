"""VideoMAE (`videomae`): VideoMAEEmbeddings adds a fixed table, get_sinusoid_encoding_table(num_patches, hidden_size):
ω_i = 10000^(−2i/d), sin at even channels and cos at odd ones (Vaswani's interleaved layout, float64 cast to
float32), one row per tubelet patch in the Conv3d's order (frame group, then row, then column): posexport's
sinusoidal encoding, base 10000, `--pair-layout interleaved`, at position_ids 0 … num_patches − 1, added before
bool_masked_pos drops the masked patches. A pretraining folder (architectures VideoMAEForPreTraining) adds a
second table of decoder_hidden_size channels to the decoder's [visible | masked] tokens, each at its own patch
index (the position_ids are the visible patches' indices, then the masked ones')."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import SinusoidTableRecipe

RECIPE = SinusoidTableRecipe(module="transformers.models.videomae.modeling_videomae", create="get_sinusoid_encoding_table")


def side(cfg: ModelConfig, key: str, default: int) -> tuple[int, int]:
    """An int or [height, width] (the config class's to_2tuple)."""
    value = cfg.get(key, default)
    pair = value if isinstance(value, list) else [value, value]
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
        cfg.fail(key, value, "expected a positive integer or [height, width]")
    return pair[0], pair[1]


def width(cfg: ModelConfig, key: str, default: int) -> int:
    d = cfg.count(key, default)
    if d % 2:
        cfg.fail(key, d, "the model's table gives an odd width one sine more than cosines; posexport's sinusoid needs "
                         "an even width")
    return d


def read(cfg: ModelConfig) -> list[Role]:
    (image_h, image_w), (patch_h, patch_w) = side(cfg, "image_size", 224), side(cfg, "patch_size", 16)
    patches = (image_h // patch_h) * (image_w // patch_w) * (cfg.count("num_frames", 16) // cfg.count("tubelet_size", 2))
    encoder = Role(
        "sinusoidal-encoder", "sinusoidal", {"d_model": width(cfg, "hidden_size", 768), "base": 10000.0}, (),
        (f"x is the tubelet patch embeddings [batch, patches, hidden] in the Conv3d's order; position_ids are 0 … "
         f"{patches - 1} (num_patches, the only input size the model takes), before masked patches are dropped",),
        RECIPE)
    if "VideoMAEForPreTraining" not in cfg.get("architectures", []):
        return [encoder]
    decoder = Role(
        "sinusoidal-decoder", "sinusoidal", {"d_model": width(cfg, "decoder_hidden_size", 384), "base": 10000.0}, (),
        ("x is the decoder's input [batch, patches, decoder_hidden]: the projected visible tokens, then the mask "
         "tokens; position_ids are each token's patch index (the visible patches' in order, then the masked ones')",),
        RECIPE)
    return [encoder, decoder]


FAMILY = Family(("videomae",), read, "sinusoidal (interleaved, over the tubelet patches; pretraining: and the decoder's)")
