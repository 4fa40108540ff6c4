"""ViT (`vit`), DeiT (`deit`) and the vision towers built the same way (CLIP's, SigLIP's, DINOv2's, BLIP's, …):
learned positions of the trained patch grid, image_size // patch_size on each side, after a class-token row
(DeiT: and a distillation-token row; SigLIP, I-JEPA: none); the tower's <X>Embeddings resample the grid
part to other image sizes with interpolate_pos_encoding (bicubic, align_corners=False, no antialias: Keys
a = −0.75).

The graph takes the patch embeddings as a grid [batch, grid_h, grid_w, hidden] and the class token
[batch, 1, hidden] and returns the token sequence with positions added, as ViTEmbeddings does before
dropout. The graph resamples the same way (vit-learned with --antialias false --cubic-coefficient -0.75).
Towers that resample otherwise say so in their line: Unlimited-OCR's encoder, DINOv2-with-registers and RF-DETR's
DINOv2 backbone with antialias=True (a = −0.5; the registers and RF-DETR's windows come after the positions), DPT
with bilinear at every grid (its _resize_pos_embed), GLM-Image by F.grid_sample at each patch's row and column
(bilinear, half-pixel centres: the same weights), TIPSv2 bilinear with antialias=True (its register tokens go in
after the class token once the positions are added, and take none), IDEFICS' tower plain bicubic by a scale factor
(DINO's (n + 0.1)/N; the trained grid kept as it is). InternVL gives image_size and patch_size as [n, n].
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family, Lookup
from .hf_code import auto_config, torch_float, trained
from .plan import Role
from .recipes import EMBEDDINGS, Recipe


@dataclass(frozen=True)
class Tower:
    module: str  # transformers.models.<module>
    embeddings: str  # the class holding the table and interpolate_pos_encoding
    prefix: int  # token rows before the grid: class token (1), then DeiT's distillation token (2)
    table: str = "position_embeddings"  # the table inside that class (CLIP's: an nn.Embedding)
    base: str = ""  # the table's path in a whole checkpoint before `embeddings.`
    sizes: tuple[int, int] = (224, 16)  # the config class's image_size and patch_size defaults
    # config keys the tower's table depends on, each with the only value read (InternVL's switch, DPT's hybrid)
    requires: tuple[tuple[str, object], ...] = ()
    antialias: bool = False  # resampled with antialias=True (bicubic: torch's Keys a = −0.5, Unlimited-OCR's encoder)
    bilinear: bool = False  # resampled bilinearly (half-pixel centres), else bicubic; without antialias at every grid
    scale_factor: bool = False  # plain bicubic by DINO's scale factor (n + 0.1)/N, the trained grid kept (IDEFICS')
    dim_key: str = "hidden_size"  # the config key of the table's width (IDEFICS': embed_dim)
    resize: str = ""  # the embeddings' own resampling method when not interpolate_pos_encoding (DPT's)
    kind: str = "vit"  # the hf session running the tower's code (GLM-Image's: its forward, grid-sample)
    note: str = ""  # what else its embeddings do beside the table (TIPSv2's register tokens)


CLIP_TABLE = "position_embedding.weight"
REGISTERS = "its register tokens go in after the class token once y is formed, without positions"
DEFAULT_MAX_GRID = 64  # vit-learned's max_grid default (importing the encoding here would import torch)
# model_type -> its tower line.
FAMILIES = {
    "vit": Tower("vit.modeling_vit", "ViTEmbeddings", 1, base="vit"),
    "deit": Tower("deit.modeling_deit", "DeiTEmbeddings", 2, base="deit"),
    "vit_msn": Tower("vit_msn.modeling_vit_msn", "ViTMSNEmbeddings", 1, base="vit"),
    "ijepa": Tower("ijepa.modeling_ijepa", "IJepaEmbeddings", 0, base="ijepa"),
    "dinov2": Tower("dinov2.modeling_dinov2", "Dinov2Embeddings", 1, base="dinov2", sizes=(224, 14)),
    "clip_vision_model": Tower("clip.modeling_clip", "CLIPVisionEmbeddings", 1, CLIP_TABLE, "vision_model", (224, 32)),
    "metaclip_2_vision_model": Tower("metaclip_2.modeling_metaclip_2", "MetaClip2VisionEmbeddings", 1, CLIP_TABLE,
                                    "vision_model", (224, 32)),
    "clipseg_vision_model": Tower("clipseg.modeling_clipseg", "CLIPSegVisionEmbeddings", 1, CLIP_TABLE, "vision_model",
                                  (224, 32)),
    "chinese_clip_vision_model": Tower("chinese_clip.modeling_chinese_clip", "ChineseCLIPVisionEmbeddings", 1,
                                       CLIP_TABLE, "vision_model", (224, 32)),
    "altclip_vision_model": Tower("altclip.modeling_altclip", "AltCLIPVisionEmbeddings", 1, CLIP_TABLE, "vision_model",
                                  (224, 32)),
    "owlvit_vision_model": Tower("owlvit.modeling_owlvit", "OwlViTVisionEmbeddings", 1, CLIP_TABLE, "vision_model",
                                 (768, 32)),
    "owlv2_vision_model": Tower("owlv2.modeling_owlv2", "Owlv2VisionEmbeddings", 1, CLIP_TABLE, "vision_model", (768, 16)),
    "siglip_vision_model": Tower("siglip.modeling_siglip", "SiglipVisionEmbeddings", 0, CLIP_TABLE, "vision_model"),
    "xclip_vision_model": Tower("x_clip.modeling_x_clip", "XCLIPVisionEmbeddings", 1, CLIP_TABLE, "vision_model", (224, 32)),
    "git_vision_model": Tower("git.modeling_git", "GitVisionEmbeddings", 1, CLIP_TABLE, "vision_model"),
    "kosmos_2_vision_model": Tower("kosmos2.modeling_kosmos2", "Kosmos2VisionEmbeddings", 1, CLIP_TABLE, "vision_model",
                                   (224, 14)),
    "bridgetower_vision_model": Tower("bridgetower.modeling_bridgetower", "BridgeTowerVisionEmbeddings", 1, CLIP_TABLE,
                                      "vision_model.visual", (288, 16)),
    "janus_vision_model": Tower("janus.modeling_janus", "JanusVisionEmbeddings", 0, CLIP_TABLE, "vision_model", (384, 16)),
    "blip_vision_model": Tower("blip.modeling_blip", "BlipVisionEmbeddings", 1, "position_embedding", "vision_model",
                               (384, 16)),
    "blip_2_vision_model": Tower("blip_2.modeling_blip_2", "Blip2VisionEmbeddings", 1, "position_embedding",
                                 "vision_model", (224, 14)),
    "instructblip_vision_model": Tower("instructblip.modeling_instructblip", "InstructBlipVisionEmbeddings", 1,
                                       "position_embedding", "vision_model", (224, 14)),
    "instructblipvideo_vision_model": Tower("instructblipvideo.modeling_instructblipvideo",
                                            "InstructBlipVideoVisionEmbeddings", 1, "position_embedding", "vision_model",
                                            (224, 14)),
    "groupvit_vision_model": Tower("groupvit.modeling_groupvit", "GroupViTVisionEmbeddings", 0, base="vision_model"),
    "flava_image_model": Tower("flava.modeling_flava", "FlavaImageEmbeddings", 1, base="image_model"),
    "internvl_vision": Tower("internvl.modeling_internvl", "InternVLVisionEmbeddings", 1, base="internvl_vision",
                             sizes=(448, 14), requires=(("use_absolute_position_embeddings", True),)),
    "qianfan_ocr_vision": Tower("qianfan_ocr.modeling_qianfan_ocr", "QianfanOCRVisionEmbeddings", 1, base="vision_model",
                                sizes=(448, 14), requires=(("use_absolute_position_embeddings", True),)),
    "granite_docling_vision": Tower("granite_docling.modeling_granite_docling", "GraniteDoclingVisionEmbeddings", 0,
                                    CLIP_TABLE, "model", (512, 16)),
    "unlimited_ocr_vision_encoder": Tower("unlimited_ocr.modeling_unlimited_ocr", "UnlimitedOcrVisionEmbeddings", 1,
                                          CLIP_TABLE, "model", (224, 14), antialias=True),
    "dpt": Tower("dpt.modeling_dpt", "DPTViTEmbeddings", 1, base="dpt", sizes=(384, 16),
                 requires=(("is_hybrid", False), ("backbone_config", None)), bilinear=True, resize="_resize_pos_embed"),
    "glm_image_vision": Tower("glm_image.modeling_glm_image", "GlmImageVisionEmbeddings", 0, CLIP_TABLE, "model",
                              (2048, 16), bilinear=True, kind="grid-sample"),
    "idefics_vision": Tower("idefics.modeling_idefics", "IdeficsVisionEmbeddings", 1, CLIP_TABLE, "vision_model", (224, 14),
                            scale_factor=True, dim_key="embed_dim"),
    "tipsv2_vision_model": Tower("tipsv2.modeling_tipsv2", "Tipsv2VisionEmbeddings", 1, base="vision_model", sizes=(448, 14),
                                 antialias=True, bilinear=True, note=REGISTERS),
    "dinov2_with_registers": Tower("dinov2_with_registers.modeling_dinov2_with_registers", "Dinov2WithRegistersEmbeddings", 1,
                                   base="dinov2_with_registers", antialias=True, note=REGISTERS),
    "rf_detr_dinov2": Tower("rf_detr.modeling_rf_detr", "RfDetrDinov2Embeddings", 1, base="rf_detr_dinov2", sizes=(224, 14),
                            antialias=True, note="its forward then cuts y into num_windows² windows of the grid, the "
                                                 "class token copied into each (when num_windows > 1)"),
}
NOTES = ("x is the patch embeddings as a grid [batch, grid_h, grid_w, hidden] (row-major patches); cls is the class "
         "token (DeiT: then the distillation token) [batch, tokens, hidden]; y is [batch, tokens + grid_h·grid_w, "
         "hidden] as the embeddings module returns it (before dropout)",)
GRID_NOTES = ("x is the patch embeddings as a grid [batch, grid_h, grid_w, hidden]; y likewise, with positions added",)
# antialias (or the bilinear forms) -> how other grids are resampled
RESAMPLED = {False: "other grids are resampled as the embeddings module does with interpolate_pos_encoding=True "
                    "(plain bicubic, a = −0.75)",
             True: "other grids are resampled as the embeddings module does (bicubic with antialias=True, a = −0.5)",
             "bilinear": "every grid is resampled as the embeddings module does (bilinear, half-pixel centres, no "
                         "antialias; the trained grid too, which it leaves unchanged)",
             "antialiased bilinear": "other grids are resampled as the embeddings module does (bilinear with "
                                     "antialias=True, half-pixel centres)",
             "scale-factor": "other grids are resampled as the embeddings module does with interpolate_pos_encoding=True "
                             "(plain bicubic, a = −0.75, by F.interpolate's scale factor (n + 0.1)/N, DINO's; the trained "
                             "grid kept as it is)"}


def read(cfg: ModelConfig) -> list[Role]:
    tower = FAMILIES[cfg.architecture]
    for key, value in tower.requires:
        if cfg.get(key, value) != value:
            cfg.fail(key, cfg.get(key), f"only {value} is read (the tower's own learned table, resampled)")
    path = f"embeddings.{tower.table}"
    resampled = ("antialiased bilinear" if tower.antialias else "bilinear") if tower.bilinear else (
        "scale-factor" if tower.scale_factor else tower.antialias)
    notes = (*(NOTES if tower.prefix else GRID_NOTES), RESAMPLED[resampled], *((tower.note,) if tower.note else ()))
    return [grid_role(cfg, tower.module, tower.embeddings, tower.prefix, (path, f"{tower.base}.{path}"),
                      cfg.number(tower.dim_key, 768, integer=True), notes, sizes=tower.sizes, antialias=tower.antialias,
                      bilinear=tower.bilinear, scale_factor=tower.scale_factor,
                      recipe=GridSampleRecipe if tower.kind == GridSampleRecipe.kind else VitRecipe, table=tower.table,
                      resize=tower.resize)]


def grid_role(cfg: ModelConfig, module: str, embeddings: str, prefix: int, keys: tuple[str, ...], dim: int,
              notes: tuple[str, ...], role: str = "vit-learned", sizes: tuple[int, int] = (224, 16), antialias: bool = False,
              bilinear: bool = False, scale_factor: bool = False, recipe: type[VitRecipe] | None = None,
              **where: Any) -> Role:
    """A learned patch-grid table (image_size // patch_size on each side, after ``prefix`` token rows)
    resampled as the model's <embeddings>.interpolate_pos_encoding does (plain bicubic, a = −0.75; or
    antialiased, torch's a = −0.5; or bilinear: antialiased as TIPSv2's, or not as DPT's; or plain bicubic by DINO's
    scale factor, IDEFICS'); the hf runtime runs the embeddings' code (``recipe``, VitRecipe by default; ``where``:
    its fields beyond the table's key, patch and classes)."""
    side = square(cfg, "image_size", sizes[0]) // (patch := square(cfg, "patch_size", sizes[1]))
    path, key = cfg.locate(keys)
    values = {"dim": dim, "trained_h": side, "trained_w": side, "class_token": prefix >= 1,
              "distillation_token": prefix == 2, "cubic_coefficient": -0.5 if antialias else -0.75, "antialias": antialias,
              **({"interpolation": "bilinear"} if bilinear else {}),
              **({"resample_by": "scale-factor"} if scale_factor else {}),
              **({"max_grid": side} if side > DEFAULT_MAX_GRID else {}),  # GLM-Image's 128 × 128 grid
              "weights": str(path), "key": key}
    hf = (recipe or VitRecipe)(key=key, patch_size=patch, module=f"transformers.models.{module}", embeddings=embeddings,
                               **where)
    return Role(role, "vit-learned", values, (), notes, hf)


def square(cfg: ModelConfig, key: str, default: int, why: str = "the tower's table is a square grid") -> int:
    """A size given as one integer or (InternVL) as [height, width]; the trained grid is square either way."""
    value = cfg.get(key, default)
    if isinstance(value, list) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        cfg.fail(key, value, f"expected a positive integer or [n, n] ({why})")
    return value


def encodings(model_type: str, lookup: Lookup) -> str:
    """vit-learned, with how the tower resamples when not plain bicubic (ViT's)."""
    tower = FAMILIES[model_type]
    form = (("antialiased bilinear" if tower.antialias else "bilinear at every grid") if tower.bilinear
            else "antialiased bicubic" if tower.antialias else "bicubic by a scale factor" if tower.scale_factor else "")
    return f"vit-learned ({form})" if form else "vit-learned"


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


TABLE = re.compile(r"position_embeddings?(\.weight)?")


@dataclass(frozen=True, kw_only=True)
class VitRecipe(Recipe):
    """The tower's embeddings class, its table (``table`` inside it) from the checkpoint's ``key``; resampled by its
    interpolate_pos_encoding, or by ``resize`` (DPT's)."""

    kind: ClassVar[str] = "vit"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"embeddings": EMBEDDINGS, "table": TABLE,
                                                       "resize": re.compile(r"_resize_pos_embed")}

    module: str
    embeddings: str
    key: str
    patch_size: int
    table: str = "position_embeddings"
    resize: str = ""


@dataclass(frozen=True, kw_only=True)
class GridSampleRecipe(VitRecipe):
    """As VitRecipe, run through the embeddings' forward, which samples the table at each patch (GLM-Image's)."""

    kind: ClassVar[str] = "grid-sample"


class VitSession(Session):
    """ViTEmbeddings' (DeiT's, BEiT's, Swin's) own interpolate_pos_encoding (DPT's _resize_pos_embed) on the
    model's trained table, added to [class (and distillation) tokens | patches] (Swin: the patches alone, y as a grid)."""

    def __init__(self, artifact: Artifact, recipe: VitRecipe, folder: Path):
        self.embeddings = transformers_attr(recipe.module, recipe.embeddings)(auto_config(folder, recipe)).eval()
        self.table = recipe.table  # SigLIP's: an nn.Embedding
        table = self.embeddings.get_parameter(self.table)
        table.data = trained(folder, recipe.key).reshape(table.shape)
        self.patch = recipe.patch_size
        self.resize = getattr(self.embeddings, recipe.resize) if recipe.resize else None

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        patches = x.reshape(batch, h * w, dim)
        tokens = torch.cat([torch_float(feeds["cls"]), patches], dim=1) if "cls" in feeds else patches
        with torch.no_grad():
            if self.resize:  # DPT's: the table and the target grid
                positions = self.resize(self.embeddings.get_parameter(self.table), h, w)
            else:
                positions = self.embeddings.interpolate_pos_encoding(tokens, h * self.patch, w * self.patch)
            y = tokens + positions
        return (y if "cls" in feeds else y.reshape(batch, h, w, dim)).numpy()


class GridSampleSession(VitSession):
    """GLM-Image's (GLM-4V's) vision embeddings forward on the model's trained table: each image's patches packed
    [patches, hidden] with their row and column (raster order), the table sampled there (F.grid_sample,
    bilinear (bicubic), border padding) and added."""

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        rows, cols = torch.arange(h).repeat_interleave(w), torch.arange(w).repeat(h)
        with torch.no_grad():
            y = [self.embeddings(x[b].reshape(h * w, dim), [h * w], torch.tensor([[1, h, w]]), rows, cols) for b in range(batch)]
        return torch.stack(y).reshape(batch, h, w, dim).numpy()


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "ViTPose: the table's class row added to every patch (position_embeddings[:, 1:] + [:, :1]), no class "
    "token, never resampled; not vit-learned's form": ("vitpose_backbone",),
    "LW-DETR's ViT: a table with a class row the tower drops (it has no class token), the grid resampled "
    "(bicubic) to window-partitioned feature maps; vit-learned reads a table whole, its class row for a class "
    "token; the detector adds DETR query positions": ("lw_detr", "lw_detr_vit"),
    "RADIO: the learned grid resampled twice (bilinear to a max(h, w) square, cropped, bilinear again when "
    "not square) after class and register tokens; vit-learned resamples once": ("radio",),
}


FAMILY = Family(tuple(FAMILIES), read, encodings, pending=PENDING, sessions={VitRecipe: VitSession, GridSampleRecipe: GridSampleSession})
