"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL (and its MoE), and the text models whose rotary is theirs (PaddleOCR-VL's:
Qwen2-VL's chunks; Cosmos-3-Edge's: Qwen3-VL's interleaving; GLM-4V's: Qwen2-VL's chunks on a partial rotary,
see below): the language model's M-RoPE (`mrope_section`, position_ids [3, batch, seq] for
temporal, height and width), read from `text_config` (transformers 5) or the top level (published
configs), where `rope_scaling` says {"type": "mrope", "mrope_section": [...]}. Qwen2-VL's sections are
chunks of consecutive frequencies; Qwen3-VL's rotary interleaves them (frequency j ≡ 1 mod 3 turns with
height, ≡ 2 with width, within 3·h and 3·w), whatever `mrope_interleaved` says, default sections
[24, 20, 20]. The vision tower's 2-D rotary (`<prefix>VisionRotaryEmbedding`, axial) is a second role,
`mrope-vision`: M-RoPE's axial form, position rows (height, width) of each patch as the tower's
rot_pos_emb lays them out, head_dim = embed_dim (Qwen2-VL) or hidden_size (Qwen2.5-VL, Qwen3-VL) //
num_heads. Qwen3-VL's vision tower also adds a learned pos_embed, a num_grid_per_side² table (side =
√num_position_embeddings) that its forward resamples to each image's grid by bilinear interpolation with
align_corners (get_vision_interpolation_indices_and_weights): a third role, `vision-pos-embed`
(vit-learned, bilinear, corners aligned), read from the checkpoint (a config-only folder's notes say it
was not built).

A vision tower's own folder (model_type qwen2_vl_vision …, TOWERS) reads the same roles from its own config:
Qwen2-VL's, Qwen2.5-VL's, Qwen3-VL's (and MoE's), Qwen3.5's (and MoE's), Qwen4-Exp's and the Omni models'
towers share one VisionRotaryEmbedding (θ_i = base^(−4i/head_dim) for i < head_dim/4, cos/sin [h-angles |
w-angles] twice, rotate_half over the whole head) and apply_rotary_pos_emb_vision (checked against each);
head_dim = embed_dim (Qwen2-VL) or hidden_size // num_heads; Qwen3-VL's, Qwen3.5's, Qwen4-Exp's and
Qwen3-Omni's towers add the pos_embed grid, the others none. Towers built as theirs are read the same way:
EXAONE-4.5's (Qwen2.5-VL's, keys on fewer heads), Cohere-Compass's (Qwen3-VL's), and the rope alone of
VideoLLaMA3's (each image merged by its own merge size), ERNIE-4.5-VL's, GLM-5-Next's, Dots3-Note's and GLM-OCR's;
PaddleOCR-VL's (raster rows, no merge inside the tower) adds a learned grid resampled bilinearly with half-pixel
centres; GLM-4V's and GLM-4.5V's towers add a learned grid sampled at each patch's centre by F.grid_sample (bicubic,
border padding), read as vit-learned's bicubic (the same weights, checked), a `vision-pos-embed` role.

GLM-4V's text rotary (GLM-4.1V, GLM-OCR, GLM-4.6V and GLM-GA, whose text model is glm4v_text; GLM-4.5V and
GLM-Image) chunks Qwen2-VL's sections over the frequencies of int(head_dim · partial_rotary_factor) channels
(θ_i = base^(−2i/rotary_dim), sections summing to rotary_dim/2, default [8, 12, 12]) and rotates only those
channels: GLM-4V's and GLM-OCR's in interleaved pairs (cos/sin repeat_interleave'd, rotate_half_llm),
GLM-4.5V's and GLM-Image's half-split. partial_rotary_factor is read from the rope block, else the top level,
else the config class's default (GLM-4.5V's 0.5, the others' 1.0). Their vision towers are not read with the
whole model; GLM-4V's, GLM-4.5V's and GLM-OCR's are read alone (below), GLM-Image's by vit.py."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from .. import checkpoint
from ..contract import Artifact
from ..runtimes.base import Session
from ..upstream import transformers_attr
from .config import ModelConfig
from .family import Family, Lookup
from .hf_code import auto_config, from_bshd, to_bshd, torch_float, trained
from .plan import Role
from .recipes import APPLY, ROTARY, Recipe, RopeRecipe
from .rope_family import CONTRACT, heads_and_dim, kv_note, layers
from .vit import CLIP_TABLE, GridSampleRecipe, grid_role

MROPE_KINDS = ("mrope", "default")


@dataclass(frozen=True)
class Line:
    module: str  # transformers.models.<module>
    prefix: str  # its text rotary class: <prefix>RotaryEmbedding
    interleaved: bool = False  # Qwen3-VL's interleaved sections, else Qwen2-VL's chunks
    # the config class's defaults when a key is absent
    section: tuple[int, int, int] = (16, 24, 24)
    theta: float = 1000000.0
    max_positions: int = 32768
    vision: bool = True  # its vision_config is a Qwen-VL tower (mrope-vision, Qwen3-VL's pos_embed)
    # GLM-4V's: the rotary's partial_rotary_factor default (None: the rotary reads none, the key is an error),
    # and the pairs its apply function rotates.
    partial: float | None = None
    pair_layout: str = "half"


QWEN3 = {"interleaved": True, "section": (24, 20, 20), "max_positions": 128000}
GLM4V = {"section": (8, 12, 12), "theta": 10000.0, "vision": False, "partial": 1.0, "pair_layout": "interleaved"}
GLM4V_MOE = {**GLM4V, "max_positions": 65536, "partial": 0.5, "pair_layout": "half"}
# model_type -> its line. PaddleOCR-VL's and Cosmos-3-Edge's text rotary are Qwen2-VL's and Qwen3-VL's M-RoPE
# (checked against theirs); their composites are read as wrappers, their vision towers being of their own.
# Qwen2.5-Omni's and Qwen3-Omni's text models (thinker, talker) rotate as Qwen2.5-VL and Qwen3-VL: their audio
# time positions (position_id_per_seconds) change only the position_ids get_rope_index makes.
FAMILIES = {"qwen2_vl": Line("qwen2_vl", "Qwen2VL"), "qwen2_5_vl": Line("qwen2_5_vl", "Qwen2_5_VL"),
            "qwen2_vl_text": Line("qwen2_vl", "Qwen2VL"), "qwen2_5_vl_text": Line("qwen2_5_vl", "Qwen2_5_VL"),
            "qwen3_vl": Line("qwen3_vl", "Qwen3VLText", **QWEN3), "qwen3_vl_text": Line("qwen3_vl", "Qwen3VLText", **QWEN3),
            "qwen3_vl_moe": Line("qwen3_vl_moe", "Qwen3VLMoeText", **QWEN3),
            "qwen3_vl_moe_text": Line("qwen3_vl_moe", "Qwen3VLMoeText", **QWEN3),
            "paddleocr_vl_text": Line("paddleocr_vl", "PaddleOCR", theta=500000.0, max_positions=131072, vision=False),
            "cosmos3_edge_text": Line("cosmos3_edge", "Cosmos3EdgeText", True, (24, 20, 20), 100000000.0, 131072, False),
            **dict.fromkeys(("qwen2_5_omni_text", "qwen2_5_omni_talker"), Line("qwen2_5_omni", "Qwen2_5Omni", vision=False)),
            "qwen3_omni_moe_text": Line("qwen3_omni_moe", "Qwen3OmniMoeThinkerText", True, (24, 20, 20), vision=False),
            "qwen3_omni_moe_talker_text": Line("qwen3_omni_moe", "Qwen3OmniMoeTalker", True, (24, 20, 20), 10000.0,
                                               vision=False),
            **dict.fromkeys(("glm4v", "glm4v_text", "glm46v", "glmga"), Line("glm4v", "Glm4vText", **GLM4V)),
            **dict.fromkeys(("glm_ocr", "glm_ocr_text"), Line("glm_ocr", "GlmOcrText", **{**GLM4V, "max_positions": 131072})),
            **dict.fromkeys(("glm4v_moe", "glm4v_moe_text"), Line("glm4v_moe", "Glm4vMoeText", **GLM4V_MOE)),
            **dict.fromkeys(("glm_image", "glm_image_text"),
                            Line("glm_image", "GlmImageText", **{**GLM4V_MOE, "max_positions": 131072, "partial": 1.0}))}


@dataclass(frozen=True)
class Tower:
    """A Qwen-VL vision tower (or a tower built as one): its module and class prefix, the keys of its width (Qwen2-VL's
    hidden_size is its merger's output), head count and depth, the tower class that adds the learned pos_embed
    (None: it has none), its config class's defaults, and how it orders the patches' position rows."""
    module: str
    prefix: str
    width: str = "hidden_size"
    pos_embed: str | None = None
    defaults: tuple[int, int, int] = (1152, 16, 27)  # width, heads, depth
    order: str = "merge-ordered"
    heads: str = "num_heads"
    depth: str = "depth"
    grid: str | None = None  # GLM-4V's: the embeddings class adding a learned grid by F.grid_sample
    # PaddleOCR-VL's pos_embed: resampled with half-pixel centres, (image_size // patch_size)² rows (the class's
    # image_size and patch_size defaults), under these checkpoint names
    corners: bool = True
    image_grid: tuple[int, int] | None = None
    table_keys: tuple[str, ...] = ("model.visual.pos_embed.weight", "visual.pos_embed.weight", "pos_embed.weight")


BERT_KEYS = {"heads": "num_attention_heads", "depth": "num_hidden_layers"}
PADDLE_TABLE = tuple(f"{prefix}vision_model.embeddings.position_embedding.weight" for prefix in ("", "model.visual.", "visual."))
# Qwen2.5-VL's window attention reorders the patches (get_vision_window_index).
QWEN2_5_TOWER = {"defaults": (3584, 16, 32), "order": "window- and merge-ordered"}
# vision model_type -> its tower (a full model's vision_config is that of f"{module}_vision"). Built as Qwen's: EXAONE-4.5's
# (Qwen2.5-VL's, keys on fewer heads), Cohere-Compass's (Qwen3-VL's); the rope alone: VideoLLaMA3's (each image's
# own merge size), ERNIE-4.5-VL's, GLM-5-Next's, Dots3-Note's and GLM-OCR's (the last three normalise q and k
# first); the rope beside a learned grid of their own: PaddleOCR-VL's, GLM-4V's and GLM-4.5V's.
TOWERS = {"qwen2_vl_vision": Tower("qwen2_vl", "Qwen2VL", "embed_dim", defaults=(1280, 16, 32)),
          "qwen2_5_vl_vision": Tower("qwen2_5_vl", "Qwen2_5_VL", **QWEN2_5_TOWER),
          "qwen3_vl_vision": Tower("qwen3_vl", "Qwen3VL", pos_embed="Qwen3VLVisionModel"),
          "qwen3_vl_moe_vision": Tower("qwen3_vl_moe", "Qwen3VLMoe", pos_embed="Qwen3VLMoeVisionModel"),
          "qwen3_5_vision": Tower("qwen3_5", "Qwen3_5", pos_embed="Qwen3_5VisionModel"),
          "qwen3_5_moe_vision": Tower("qwen3_5_moe", "Qwen3_5Moe", pos_embed="Qwen3_5MoeVisionModel"),
          "qwen4_exp_vision": Tower("qwen4_exp", "Qwen4Exp", pos_embed="Qwen4ExpVisionModel"),
          "qwen2_5_omni_vision_encoder": Tower("qwen2_5_omni", "Qwen2_5Omni", **QWEN2_5_TOWER),
          "qwen3_omni_moe_vision_encoder": Tower("qwen3_omni_moe", "Qwen3OmniMoe", pos_embed="Qwen3OmniMoeVisionEncoder"),
          "exaone4_5_vision": Tower("exaone4_5", "Exaone4_5_", **QWEN2_5_TOWER),
          "cohere_compass_vision": Tower("cohere_compass", "CohereCompass", pos_embed="CohereCompassVisionModel"),
          "video_llama_3_vision": Tower("video_llama_3", "VideoLlama3", defaults=(768, 12, 12),
                                        order="merge-ordered by each image's merge_sizes", **BERT_KEYS),
          "ernie4_5_vl_moe_vision": Tower("ernie4_5_vl_moe", "Ernie4_5_VLMoe", defaults=(1280, 16, 32)),
          "glm5_next_vision": Tower("glm5_next", "Glm5Next", defaults=(1024, 16, 24)),
          "dots3_note_vision_encoder": Tower("dots3_note", "Dots3Note", defaults=(1536, 24, 42), **BERT_KEYS),
          "glm_ocr_vision": Tower("glm_ocr", "GlmOcr", defaults=(1024, 16, 24)),
          "paddleocr_vl_vision": Tower("paddleocr_vl", "PaddleOCR", pos_embed="PaddleOCRVisionEmbeddings",
                                       order="raster order: it merges after the tower", corners=False,
                                       image_grid=(384, 14), table_keys=PADDLE_TABLE, **BERT_KEYS),
          "glm4v_vision": Tower("glm4v", "Glm4v", defaults=(1536, 12, 24), grid="Glm4vVisionEmbeddings"),
          "glm4v_moe_vision": Tower("glm4v_moe", "Glm4vMoe", defaults=(1536, 12, 24), grid="Glm4vMoeVisionEmbeddings")}
TOWER_NOT_BUILT = "the vision tower's positions (vision_config) are not read: not built"
NOTES = ("position_ids are the model's [3, batch, seq] (get_rope_index: temporal, height, width; text tokens "
         "carry three equal rows)", CONTRACT.replace("position_ids are the model's own", "position rows are 0-based"))


def read(cfg: ModelConfig) -> list[Role]:
    if cfg.architecture in TOWERS:
        return tower_roles(cfg, TOWERS[cfg.architecture], False)
    text = cfg
    if cfg.has("text_config"):
        text = ModelConfig(cfg.get("text_config"), cfg.architecture, f"{cfg.source} text_config", cfg.folder)
    heads, head_dim = heads_and_dim(text)
    present = [n for n in ("rope_parameters", "rope_scaling") if text.has(n)]
    block = dict(text.get(present[0]) if present else {})
    kind = block.pop("rope_type", block.pop("type", "default"))
    if kind not in MROPE_KINDS:
        text.fail(present[0], kind, "Qwen2-VL's rope is M-RoPE without scaling")
    line = FAMILIES[cfg.architecture]
    interleaved = line.interleaved
    if block.pop("mrope_interleaved", interleaved) is not interleaved:
        text.fail(f"{present[0]}.mrope_interleaved", not interleaved, f"transformers' {cfg.architecture} "
                  f"{'always' if interleaved else 'never'} interleaves its sections")
    section = block.pop("mrope_section", list(line.section))
    theta = block.pop("rope_theta", text.number("rope_theta", line.theta))
    rotary_dim = head_dim
    if line.partial is not None:  # transformers moves a top-level factor into the block unless it has one
        partial = block.pop("partial_rotary_factor", text.number("partial_rotary_factor", line.partial))
        if isinstance(partial, bool) or not isinstance(partial, (int, float)) or not 0 < partial <= 1:
            text.fail("partial_rotary_factor", partial, "expected a number in (0, 1]")
        rotary_dim = int(head_dim * partial)
    if block:
        key = next(iter(block))
        text.fail(f"{present[0]}.{key}", block[key], "not a key of Qwen2-VL's M-RoPE")
    values = {"head_dim": head_dim, "heads": heads, "rotary_dim": rotary_dim, "base": float(theta),
              "mrope_section": tuple(section), "pair_layout": line.pair_layout,
              "max_positions": text.number("max_position_embeddings", line.max_positions, integer=True),
              "interleaved": interleaved}
    module, prefix = line.module, line.prefix
    hf = RopeRecipe(module=f"transformers.models.{module}.modeling_{module}", rotary=f"{prefix}RotaryEmbedding",
                    apply="apply_rotary_pos_emb", text_config=True)
    text.ignore("use_sliding_window", "sliding_window", "max_window_layers")
    # Qwen2.5-Omni's talker: the audio time positions get_rope_index makes (the position_ids passed in)
    text.ignore("position_id_per_seconds", "seconds_per_chunk")
    if text is not cfg:
        text.check_all_read()
    tower = (TOWER_NOT_BUILT,) if not line.vision and cfg.has("vision_config") else ()
    roles = [Role("mrope", "mrope", values, layers(text), (*NOTES, *kv_note(text, heads), *tower), hf)]
    if line.vision and cfg.has("vision_config"):
        data = cfg.get("vision_config")
        if not isinstance(data, dict):
            cfg.fail("vision_config", data, "expected an object")
        vision = ModelConfig(data, cfg.architecture, f"{cfg.source} vision_config", cfg.folder)
        roles += tower_roles(vision, TOWERS[f"{module}_vision"], True)
    return roles


def tower_roles(vision: ModelConfig, tower: Tower, in_model: bool) -> list[Role]:
    """The tower's axial rope and (Qwen3-VL's towers) its pos_embed, from its config: a full model's vision_config
    (``in_model``: the hf runtime takes the config's vision_config) or a tower's own."""
    width_default, heads_default, depth_default = tower.defaults
    heads = vision.count(tower.heads, heads_default)
    width = vision.count(tower.width, width_default)
    head_dim = vision.count("head_dim") if vision.has("head_dim") else width // heads
    block = dict(vision.get("rope_parameters", None) or {"rope_type": "axial"})
    if block.pop("rope_type", "axial") != "axial" or set(block) - {"rope_theta"}:
        vision.fail("rope_parameters", vision.get("rope_parameters"), "Qwen-VL's vision rotary is axial with rope_theta only")
    # deepstack: which layers feed the merger; a tower without pos_embed has no num_position_embeddings to read.
    vision.ignore("deepstack_visual_indexes")
    rows = None
    if tower.image_grid:
        rows = (vision.count("image_size", tower.image_grid[0]) // vision.count("patch_size", tower.image_grid[1])) ** 2
    elif tower.pos_embed:
        rows = vision.count("num_position_embeddings", 2304)  # the class default
    vision.check_all_read()
    values = {"head_dim": head_dim, "heads": heads, "base": float(block.get("rope_theta", 10000.0)), "axial": True,
              "mrope_section": (head_dim // 4, head_dim // 4), "max_positions": 32768}
    module = f"transformers.models.{tower.module}.modeling_{tower.module}"
    hf = VisionRopeRecipe(module=module, rotary=f"{tower.prefix}VisionRotaryEmbedding", apply="apply_rotary_pos_emb_vision",
                          vision_config=in_model)
    notes = ("x is one vision attention layer's q or k, [1, patches, heads, head_dim] (the tower's [patches, heads, "
             "head_dim] with a batch axis); position_ids are [2, 1, patches]: each patch's (height, width) row and "
             f"column, as the tower lays them out ({tower.order}: get_vision_position_ids)", *kv_note(vision, heads))
    rope = Role("mrope-vision", "mrope", values, tuple(range(vision.count(tower.depth, depth_default))), notes, hf)
    if tower.grid:
        return grid_sampled_role(vision, tower, width, rope, in_model)
    return [rope] if rows is None else pos_embed_role(vision, tower, rows, rope, in_model)


def grid_sampled_role(vision: ModelConfig, tower: Tower, width: int, rope: Role, in_model: bool) -> list[Role]:
    """The vision rope role and GLM-4V's learned grid (image_size // patch_size a side), which its embeddings sample
    at each patch's centre with F.grid_sample (bicubic, border padding): vit-learned's bicubic weights (a = −0.75,
    no antialias; checked against the embeddings' own forward). A folder without weights gets the rope role only."""
    if not checkpoint.has_weights(vision.folder):
        return [dataclasses.replace(rope, notes=(*rope.notes, "the vision tower's learned grid is in the weights, which "
                                                              "this folder lacks: not built"))]
    notes = ("x is the patch embeddings of one image (after post_conv_layernorm) as a grid [batch, grid_h, grid_w, hidden], "
             "row-major; the tower orders them in spatial_merge_size blocks: reorder before and after",
             "every grid is resampled as the embeddings do (F.grid_sample at each patch's centre, bicubic, border "
             "padding: F.interpolate's bicubic weights, a = −0.75; the trained grid unchanged)")
    role = grid_role(vision, f"{tower.module}.modeling_{tower.module}", tower.grid, 0, GRID_KEYS, width, notes,
                     "vision-pos-embed", (336, 14), recipe=GridSampleRecipe, table=CLIP_TABLE, vision_config=in_model)
    return [rope, role]


# GLM-4V's grid in a tower's own checkpoint, or in a whole model's.
GRID_KEYS = ("embeddings.position_embedding.weight", "model.visual.embeddings.position_embedding.weight")
# The graph covers grids up to this many patches a side (--max-grid overrides): 2048 px at 16 px patches.
POS_EMBED_GRID = 128


def pos_embed_role(vision: ModelConfig, tower: Tower, rows: int, rope: Role, in_model: bool) -> list[Role]:
    """The vision rope role and the tower's learned pos_embed, resampled to the image's patch grid as
    its tower does; a folder without weights gets the rope role only, its notes saying so (as Gemma-3's)."""
    if not checkpoint.has_weights(vision.folder):
        return [dataclasses.replace(rope, notes=(*rope.notes, "the vision tower's learned pos_embed is in the weights, "
                                                              "which this folder lacks: not built"))]
    side = math.isqrt(rows)
    if side * side != rows:
        vision.fail("num_position_embeddings", rows, "expected a square number: the table is a num_grid_per_side² grid")
    path, key = vision.locate(tower.table_keys)
    values = {"dim": vision.count("hidden_size", tower.defaults[0]), "trained_h": side, "trained_w": side,
              "interpolation": "bilinear", "align_corners": tower.corners, "antialias": False,
              "max_grid": max(POS_EMBED_GRID, side), "weights": str(path), "key": key}
    hf = GridInterpolateRecipe(module=f"transformers.models.{tower.module}.modeling_{tower.module}", tower=tower.pos_embed,
                               key=key, vision_config=in_model)
    order = ("the tower's own order" if tower.image_grid else
             "the tower orders them in spatial_merge_size blocks: reorder before and after")
    notes = (f"x is the patch embeddings of one image (patch_embed's output) as a grid [batch, grid_h, grid_w, hidden], "
             f"row-major; {order}",
             f"pos_embed is a {side}×{side} grid resampled as the tower's forward does (bilinear, "
             f"align_corners={tower.corners})")
    return [rope, Role("vision-pos-embed", "vit-learned", values, (), notes, hf)]


def encodings(model_type: str, lookup: Lookup) -> str:
    """M-RoPE with the forms of its line, and its vision tower's where its vision_config is a Qwen-VL tower (a
    tower's own folder: the tower's alone)."""
    if model_type in TOWERS:
        return tower_encodings(TOWERS[model_type])
    line = FAMILIES[model_type]
    vision = line.vision and not model_type.endswith("_text")
    forms = [*(["interleaved sections"] if line.interleaved else []), *(["partial"] if line.partial is not None else []),
             *(["interleaved pairs"] if line.pair_layout == "interleaved" else [])]
    return ", ".join(["mrope" + (f" ({', '.join(forms)})" if forms else ""),
                      *([tower_encodings(TOWERS[f"{line.module}_vision"])] if vision else [])])


def tower_encodings(tower: Tower) -> str:
    return ", ".join(["mrope-vision (axial)", *(["vit-learned pos_embed (bilinear)"] if tower.pos_embed else []),
                      *(["vit-learned grid (bicubic, by grid_sample)"] if tower.grid else [])])


# --- the transformers sessions that judge its roles (the hf runtime, posexport.models.oracle) ---------------


@dataclass(frozen=True, kw_only=True)
class VisionRopeRecipe(Recipe):
    """A Qwen-VL tower's VisionRotaryEmbedding and apply_rotary_pos_emb_vision."""

    kind: ClassVar[str] = "vision-rope"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"rotary": ROTARY, "apply": APPLY}

    module: str
    rotary: str
    apply: str


@dataclass(frozen=True, kw_only=True)
class GridInterpolateRecipe(Recipe):
    """A Qwen3-VL tower class (built on the meta device) for its interpolation, its pos_embed from the checkpoint."""

    kind: ClassVar[str] = "grid-interpolate"
    names: ClassVar[Mapping[str, re.Pattern[str]]] = {"tower": re.compile(r"[A-Za-z0-9_]+Vision(Model|Encoder|Embeddings)")}

    module: str
    tower: str
    key: str


class VisionRopeSession(Session):
    """A Qwen-VL vision tower's own axial VisionRotaryEmbedding on each patch's (height, width) and its
    apply_rotary_pos_emb_vision, per batch row (the tower has no batch axis)."""

    def __init__(self, artifact: Artifact, recipe: VisionRopeRecipe, folder: Path):
        self.rotary = transformers_attr(recipe.module, recipe.rotary)(auto_config(folder, recipe)).eval()
        self.apply = transformers_attr(recipe.module, recipe.apply)
        self.p = artifact.params

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch

        bshd = to_bshd(feeds["x"], self.p)
        rows = torch.from_numpy(np.ascontiguousarray(feeds["position_ids"]))  # [2, batch, seq]
        with torch.no_grad():
            out = torch.stack([self.apply(bshd[b], bshd[b], *self.rotary(bshd[b], rows[:, b].T))[0] for b in range(bshd.shape[0])])
        return from_bshd(out, self.p)


class GridInterpolateSession(Session):
    """A Qwen3-VL vision tower's pos_embed as its forward adds it: transformers' own
    get_vision_interpolation_indices_and_weights with the tower's (PaddleOCR-VL's: its embeddings') interpolation mode
    and align_corners (built on the meta device: nothing allocated) and its num_grid_per_side, the trained rows gathered
    and summed with their weights. Patches in raster order (spatial_merge_size 1): the graph's grid."""

    def __init__(self, artifact: Artifact, recipe: GridInterpolateRecipe, folder: Path):
        import torch

        with torch.device("meta"):
            tower = transformers_attr(recipe.module, recipe.tower)(auto_config(folder, recipe))
        self.side, self.mode, self.corners = tower.num_grid_per_side, tower.interpolation_mode, tower.interpolation_align_corners
        self.table = trained(folder, recipe.key)

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        import torch
        get_vision_interpolation_indices_and_weights = transformers_attr(
            "transformers.vision_utils", "get_vision_interpolation_indices_and_weights")

        x = torch_float(feeds["x"])
        batch, h, w, dim = x.shape
        with torch.no_grad():
            indices, weights = get_vision_interpolation_indices_and_weights(
                torch.tensor([[1, h, w]]), self.side, mode=self.mode, align_corners=self.corners, spatial_merge_size=1)
            rows = (torch.nn.functional.embedding(indices, self.table) * weights[:, :, None]).sum(1)
        return (x + rows.reshape(h, w, dim)).numpy()


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "HunYuan-VL: its sections split the doubled [θ | θ] vector (2·section each, XD-RoPE's rows), so a pair's two "
    "channels can turn with different rows; checked against posexport's mrope: differs":
        ("hunyuan_vl", "hunyuan_vl_text"),
    "ERNIE-4.5-VL: sections ordered height and width alternating per frequency, then time, on interleaved pairs "
    "(repeat_interleave(2)); checked against posexport's mrope (Qwen's layouts, half-split): differs":
        ("ernie4_5_vl_moe", "ernie4_5_vl_moe_text"),
    "M-RoPE text model whose rope_parameters and mrope_section are keyed by layer type (Qwen3-VL's interleaved "
    "sections per layer type); the Qwen-VL reader reads one M-RoPE block": ("cohere_compass", "cohere_compass_text"),
    "HY-V4-VL: Qwen3-VL's interleaved M-RoPE inside HY-V4's hybrid stack (multi-head latent attention beside "
    "linear-attention layers without rope); layer plan not read yet": ("hy_v4_vl", "hy_v4_vl_text"),
    "not M-RoPE (its rotary takes [batch, seq] positions): 1-D partial rope beside a lightning indexer "
    "(index_head_dim) that rotates its own index heads, a second rope site; not read yet":
        ("minimax_m3_vl", "minimax_m3_vl_text"),
    "Step-3.5/3.7: not M-RoPE (1-D rope per layer type), but its config class converts per-layer rope_theta and "
    "partial_rotary_factors lists of published configs, sliding layers take their own heads (per_layer_config), "
    "and a sparse indexer (sparse_attention_config) sits beside attention; not read yet": ("step3p7", "step3p5"),
    "Dots3-Note: not M-RoPE (1-D rope per layer type, partial), on multi-head latent attention with an indexer "
    "(index_head_dim, indexed_attention layers); not read yet": ("dots3_note", "dots3_note_text"),
}


FAMILY = Family((*FAMILIES, *TOWERS), read, encodings, pending=PENDING, sessions={VisionRopeRecipe: VisionRopeSession, GridInterpolateRecipe: GridInterpolateSession})
