"""ViT-MAE (`vit_mae`): ViTMAEEmbeddings holds position_embeddings, a frozen [1, 1 + grid², hidden] parameter that
transformers initialises as a zero class row over posexport's sincos-2d grid (MAE's [sin w | cos w | sin h | cos h],
ω_k = 10000^(−k/(hidden/4))). The checkpoint holds it, and other image sizes resample its grid part bicubically
(interpolate_pos_encoding, ViT's code) instead of evaluating the formula there: so the table is read, as ViT's
(vit-learned with a class token, vit.py). The patches take their rows before random_masking keeps a random
mask_ratio-sized subset of them; the class token takes row 0 after. A pretraining folder (architectures
ViTMAEForPreTraining) also adds decoder_pos_embed [1, 1 + grid², decoder_hidden] to the decoder's [class | all patch
tokens, restored to raster order]: the learned table at position_ids 0 … grid², at the trained image size (the
decoder's interpolate_pos_encoding resamples the flattened patch rows in 1-D, which no posexport form does)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe
from .vit import NOTES, RESAMPLED, grid_role, square

ENCODER_TABLE = ("embeddings.position_embeddings", "vit.embeddings.position_embeddings")
DECODER_TABLE = ("decoder.decoder_pos_embed",)
MASKED = "random_masking then keeps a random subset of the positioned patches (mask_ratio); the class token is not masked"


def read(cfg: ModelConfig) -> list[Role]:
    encoder = grid_role(cfg, "vit_mae.modeling_vit_mae", "ViTMAEEmbeddings", 1, ENCODER_TABLE,
                        cfg.count("hidden_size", 768), (*NOTES, RESAMPLED[False], MASKED))
    if "ViTMAEForPreTraining" not in cfg.get("architectures", []):
        return [encoder]
    rows = (square(cfg, "image_size", 224) // square(cfg, "patch_size", 16)) ** 2 + 1
    path, key = cfg.locate(DECODER_TABLE)
    notes = ("x is the decoder's [class | patch tokens in raster order] [batch, 1 + patches, decoder_hidden] (the "
             f"projected visible tokens and mask tokens, unshuffled); position_ids are 0 … {rows - 1}, the table's rows",
             "the trained image size only: the decoder's interpolate_pos_encoding resamples the flattened patch rows in "
             "1-D (not built)")
    return [encoder, Role("learned-decoder", "learned", {"weights": str(path), "key": key, "max_positions": rows}, (), notes,
                          LearnedRecipe(key=key))]


FAMILY = Family(("vit_mae",), read, "vit-learned with class token (its sincos-2d-initialised table); pretraining: and the decoder's learned table")
