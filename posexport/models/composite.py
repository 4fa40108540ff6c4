"""Composite model folders whose parts posexport reads as their own types: dual encoders (CLIP and its kin: a text
tower's learned table and a vision tower's learned grid; VisionTextDualEncoder of any two), encoder-decoders
whose encoder and decoder have configs of their own (Dia, T5Gemma, Pix2Struct; EncoderDecoder and
VisionEncoderDecoder of any two), Kosmos-2 and Kosmos-2.5, multi-part models (BLT), audio-text models (CLAP,
PE-Audio, Fun-ASR-Nano), Qwen-Omni's thinkers and the whole Qwen2.5-Omni, BLIP-2 and InstructBLIP. A part may be a
composite itself.

Each part is its sub-config (text_config, vision_config, encoder_config …) read by its own type's reader exactly
as a folder of that type (wrapper.py does the same for a wrapper's text_config), its roles renamed with the
part's prefix (`text-learned`, `vision-vit-learned`). transformers builds each part with the class the
composite's config class fixes for it, so the sub-config must be of the line's type (a part the config class
leaves to AutoConfig is read as its own model_type). A part's trained tables are looked up only under the module
the composite's model holds it in (CLIPModel's `text_model`, `vision_model`), and the hf runtime runs the part's
own code on that sub-config (recipe `part`). Sub-configs of towers without a position encoding are named in the
line with why; a table the composite holds beside its parts (X-CLIP's frame table) is a role of its own."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import PosexportError
from .config import ModelConfig
from .family import Family, Lookup
from .learned import BART_LIKE
from .plan import Role
from .recipes import LearnedRecipe


@dataclass(frozen=True)
class Part:
    key: str  # its sub-config in config.json
    model_type: str | None  # the type the composite's config class makes it (None: its own model_type, any read type)
    role: str  # the prefix of its roles' names
    module: str = ""  # where the composite's model holds it: its checkpoint names start there
    note: str = ""  # what its position_ids are, where the composite gives them otherwise than a folder of its type
    alone: bool = False  # a decoder built as a causal LM alone: a type read as a whole encoder-decoder is refused


@dataclass(frozen=True)
class Table:
    """A trained table the composite itself holds beside its parts, added whole to [batch, rows, hidden]: its
    rows at position_ids 0 … rows − 1 (posexport's learned table)."""

    role: str
    key: str  # its checkpoint name
    part: str  # the sub-config sizing it
    rows: tuple[str, int]  # that sub-config's key giving its rows, and the config class's default
    note: str  # what it is added to


@dataclass(frozen=True)
class Composite:
    parts: tuple[Part, ...]
    # (sub-config, its model_type, why it holds no position encoding)
    without: tuple[tuple[str, str, str], ...] = ()
    # top-level keys that speak of positions but reach no part's position code (at most the position_ids passed in)
    unused: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()


def dual(text: str, vision: str) -> Composite:
    """A dual encoder: its text tower under `text_model`, its vision tower under `vision_model`."""
    return Composite((Part("text_config", text, "text", "text_model"),
                      Part("vision_config", vision, "vision", "vision_model")))


OMNI_TIMES = ("position_ids are [3, batch, seq] as get_rope_index makes them: audio and video tokens take temporal ids "
              "of position_id_per_seconds a second (in chunks of seconds_per_chunk); pass those")
COMPOSITES: dict[str, Composite] = {
    "clip": dual("clip_text_model", "clip_vision_model"),
    "siglip": dual("siglip_text_model", "siglip_vision_model"),
    "siglip2": dual("siglip2_text_model", "siglip2_vision_model"),
    "metaclip_2": dual("metaclip_2_text_model", "metaclip_2_vision_model"),
    "owlvit": dual("owlvit_text_model", "owlvit_vision_model"),
    "owlv2": dual("owlv2_text_model", "owlv2_vision_model"),
    "groupvit": dual("groupvit_text_model", "groupvit_vision_model"),
    "aimv2": dual("aimv2_text_model", "aimv2_vision_model"),
    "clipseg": dual("clipseg_text_model", "clipseg_vision_model"),
    "chinese_clip": dual("chinese_clip_text_model", "chinese_clip_vision_model"),
    "altclip": dual("altclip_text_model", "altclip_vision_model"),
    "blip": dual("blip_text_model", "blip_vision_model"),
    "bridgetower": dual("bridgetower_text_model", "bridgetower_vision_model"),
    "tipsv2": dual("tipsv2_text_model", "tipsv2_vision_model"),
    # a dual encoder of any two read towers (AutoConfig parts; a CLIP vision tower is held as CLIPVisionModel)
    # X-CLIP: the vision tower runs on each frame; its multi-frame integration transformer adds a frame table
    "xclip": Composite(dual("xclip_text_model", "xclip_vision_model").parts, tables=(Table(
        "frames-learned", "mit.position_embedding", "vision_config", ("num_frames", 8),
        "x is the frames' projected class features [batch, num_frames, projection_dim] before the multi-frame "
        "integration transformer (XCLIPMultiframeIntegrationTransformer), which takes exactly num_frames frames"),)),
    "vision-text-dual-encoder": Composite((Part("text_config", None, "text", "text_model"),
                                           Part("vision_config", None, "vision", "vision_model"))),
    # an encoder and a causal-LM decoder of any read types (EncoderDecoderModel, VisionEncoderDecoderModel: TrOCR's
    # ViT or DeiT encoder and its decoder); a decoder of a type read as a whole encoder-decoder (MBart's) is refused
    "encoder-decoder": Composite((Part("encoder", None, "encoder", "encoder"),
                                  Part("decoder", None, "decoder", "decoder", alone=True))),
    "vision-encoder-decoder": Composite((Part("encoder", None, "encoder", "encoder"),
                                         Part("decoder", None, "decoder", "decoder", alone=True))),
    "kosmos-2": Composite((Part("text_config", "kosmos_2_text_model", "text", "text_model"),
                           Part("vision_config", "kosmos_2_vision_model", "vision", "vision_model.model"))),
    "flava": Composite((Part("text_config", "flava_text_model", "text", "text_model"),
                        Part("image_config", "flava_image_model", "image", "image_model")),
                       (("multimodal_config", "flava_multimodal_model",
                         "the multimodal encoder takes the towers' hidden states (positions added) and a class token"),
                        ("image_codebook_config", "flava_image_codebook",
                         "the image codebook (pretraining targets) is convolutional"))),
    "align": Composite((Part("text_config", "align_text_model", "text", "text_model"),),
                       (("vision_config", "align_vision_model",
                         "the vision tower is an EfficientNet (convolutional)"),)),
    "clap": Composite((Part("text_config", "clap_text_model", "text", "text_model"),
                       Part("audio_config", "clap_audio_model", "audio", "audio_model"))),
    "dia": Composite((Part("encoder_config", "dia_encoder", "encoder", "encoder"),
                      Part("decoder_config", "dia_decoder", "decoder", "decoder"))),
    "t5gemma": Composite((Part("encoder", "t5_gemma_module", "encoder", "encoder"),
                          Part("decoder", "t5_gemma_module", "decoder", "decoder"))),
    "blt": Composite((Part("patcher_config", "blt_patcher", "patcher", "patcher"),
                      Part("encoder_config", "blt_local_encoder", "encoder", "local_encoder"),
                      Part("global_config", "blt_global_transformer", "global", "global_transformer",
                           note="BltModel gives the global transformer patch indices (0 … patches − 1) as position_ids; "
                                "the local encoder and decoder take byte indices"),
                      Part("decoder_config", "blt_local_decoder", "decoder", "local_decoder")),
                     # BltModel builds each part's rotary from the part's own config: the top level's reach none
                     unused=("rope_parameters", "max_position_embeddings")),
    "fun_asr_nano": Composite((Part("text_config", None, "text", "language_model"),
                               Part("audio_config", None, "audio", "audio_tower")),
                              (("adaptor_config", "", "the projector's adaptor layers attend without positions "
                                                      "(FunAsrNanoEncoderLayer with use_fsmn=False)"),)),
    "pe_audio": Composite((Part("text_config", None, "text", "text_model"),
                           Part("audio_config", "pe_audio_encoder", "audio", "audio_encoder"))),
    # Qwen-Omni's thinker: its M-RoPE text model, its chunked audio encoder and its vision tower, each its own type
    **{thinker: Composite((Part("text_config", f"{base}_text", "text", "model.language_model", note=OMNI_TIMES),
                           Part("audio_config", f"{base}_audio_encoder", "audio", "model.audio_tower"),
                           Part("vision_config", f"{base}_vision_encoder", "vision", "model.visual")),
                          unused=("position_id_per_seconds", "seconds_per_chunk"))
       for thinker, base in (("qwen2_5_omni_thinker", "qwen2_5_omni"), ("qwen3_omni_moe_thinker", "qwen3_omni_moe"))},
    # Qwen2.5-Omni's speech output: its talker (an M-RoPE decoder), its token2wav (a DiT with its own rope beside a
    # BigVGAN vocoder), and the whole model of thinker, talker and token2wav
    "qwen2_5_omni_token2wav": Composite((Part("dit_config", "qwen2_5_omni_dit", "dit", "code2wav_dit_model"),),
                                        (("bigvgan_config", "qwen2_5_omni_bigvgan", "the BigVGAN vocoder is convolutional"),)),
    "qwen2_5_omni": Composite((Part("thinker_config", "qwen2_5_omni_thinker", "thinker", "thinker"),
                               Part("talker_config", "qwen2_5_omni_talker", "talker", "talker.model", note=OMNI_TIMES),
                               Part("token2wav_config", "qwen2_5_omni_token2wav", "token2wav", "token2wav"))),
    # BLIP-2 and InstructBLIP: a ViT, a Q-Former, and a language model of any read type (OPT by default)
    "blip-2": Composite((Part("vision_config", "blip_2_vision_model", "vision", "vision_model"),
                         Part("text_config", None, "text", "language_model")),
                        (("qformer_config", "blip_2_qformer", "its learned query tokens attend to the image features; "
                                                              "it embeds no tokens"),)),
    **{kind: Composite((Part("vision_config", f"{kind}_vision_model", "vision", "vision_model"),
                        Part("qformer_config", f"{kind}_qformer", "qformer", "qformer"),
                        Part("text_config", None, "text", "language_model")))
       for kind in ("instructblip", "instructblipvideo")},
    # Pix2Struct: its text decoder's T5 bias and its vision encoder's row and column tables
    "pix2struct": Composite((Part("text_config", "pix2struct_text_model", "text", "decoder"),
                             Part("vision_config", "pix2struct_vision_model", "vision", "encoder"))),
    # Kosmos-2.5: its image-to-text projection's latent queries cross-attend to the tower's output without positions
    "kosmos-2.5": Composite((Part("text_config", "kosmos_2_5_text_model", "text", "text_model"),
                             Part("vision_config", "kosmos_2_5_vision_model", "vision", "vision_model"))),
    # π0.5: the action expert's position_ids continue the prefix's (attention-mask cumsum), computed by PI05Model
    "pi05": Composite((Part("vlm_config", "paligemma", "vlm", "model.vlm"),
                       Part("dit_config", "gemma", "dit", "model.dit",
                            note="PI05Model gives the action expert the positions after the prefix's "
                                 "(cumsum of the prefix and action attention mask − 1)"))),
}
NOTE = "the {role} part ({key}, model_type {inner}) read as a {inner} folder"
# Real composites nest two deep (Qwen2.5-Omni's thinker) and hold seven parts in all: a config past these
# caps is refused, naming the part, before anything is read or built.
MAX_DEPTH = 4
MAX_PARTS = 32


def check_size(cfg: ModelConfig) -> None:
    """The composite's parts, counted through every nested composite (by their configs alone, stopping
    at the caps), within MAX_DEPTH levels and MAX_PARTS parts; refused naming the part past a cap."""
    count, todo = 0, [(cfg.data, cfg.architecture, "", 1)]
    while todo:
        data, architecture, path, depth = todo.pop()
        for part in COMPOSITES[architecture].parts:
            sub, named = data.get(part.key), f"{path}.{part.key}".lstrip(".")
            count += 1
            if depth > MAX_DEPTH or count > MAX_PARTS:
                cap = f"nested past {MAX_DEPTH} levels" if depth > MAX_DEPTH else f"past {MAX_PARTS} parts in all"
                raise PosexportError(f"{cfg.source}: composite part {named[:200]!r}: {cap}; real models nest two deep "
                                     "and hold a handful of parts, so this config is refused")
            inner = sub.get("model_type", part.model_type) if isinstance(sub, dict) else None
            if isinstance(inner, str) and inner in COMPOSITES:
                todo.append((sub, inner, named, depth + 1))


def read(cfg: ModelConfig) -> list[Role]:
    line = COMPOSITES[cfg.architecture]
    check_size(cfg)
    cfg.ignore(*line.unused)
    for key, model_type, why in line.without:
        data = cfg.get(key, {})
        if not isinstance(data, dict) or data.get("model_type", model_type) != model_type:
            cfg.fail(key, data, f"expected the {model_type or key} of this model ({why}: no position encoding)")
    beside = tuple(f"{key}{f' ({model_type})' if model_type else ''}: no position encoding; {why}"
                   for key, model_type, why in line.without)
    types = {}
    for part in line.parts:  # every part's type judged before any is read: an unread part is named first
        data = cfg.get(part.key)
        types[part.key] = inner = data.get("model_type", part.model_type) if isinstance(data, dict) else None
        if part.model_type is not None and inner != part.model_type:
            cfg.fail(part.key, data if not isinstance(data, dict) else inner,
                     f"the {cfg.architecture} model builds this part as {part.model_type}")
        if not isinstance(inner, str) or inner not in cfg.catalogue.families:  # a list or an object is no type
            cfg.fail(f"{part.key}.model_type", inner, f"that part is not read: {cfg.catalogue.why_not(inner)}"
                     if isinstance(inner, str) else "that part's model_type is missing")
    roles = []
    for part in line.parts:
        data, inner = cfg.get(part.key), types[part.key]
        within = ".".join(m for m in (cfg.within, part.module) if m)
        sub = ModelConfig(data, inner, f"{cfg.source} {part.key}", cfg.folder, within, cfg.catalogue)
        read_part = cfg.catalogue.families[inner].read
        whole = "encoder" in BART_LIKE.get(inner, ((),))[0]  # its reader reads an encoder table beside
        found = () if part.alone and whole else read_part(sub)
        if part.alone and (whole or any("encoder" in r.role for r in found)):
            cfg.fail(f"{part.key}.model_type", inner, "posexport reads this type as a whole encoder-decoder, not as "
                     "the causal-LM decoder alone built here")
        sub.check_all_read()
        notes = (NOTE.format(role=part.role, key=part.key, inner=inner), *filter(None, [part.note]), *beside)
        roles += [dataclasses.replace(r, role=f"{part.role}-{r.role}", notes=(*r.notes, *notes),
                                      hf=dataclasses.replace(r.hf, part=".".join((part.key, *filter(None, [r.hf.part])))))
                  for r in found]
    for table in line.tables:
        sizing = ModelConfig(cfg.get(table.part), cfg.architecture, f"{cfg.source} {table.part}", cfg.folder)
        rows = sizing.count(*table.rows)
        path, key = cfg.locate((table.key,))
        notes = (table.note, f"position_ids are 0 … {rows - 1} ({table.part}.{table.rows[0]} rows)")
        roles.append(Role(table.role, "learned", {"weights": str(path), "key": key, "max_positions": rows}, (), notes,
                          LearnedRecipe(key=key, part=table.part)))
    return roles


def encodings(model_type: str, lookup: Lookup) -> str:
    """Each part's line, as its own type's (a part the composite leaves to AutoConfig: its key's type's), and the
    composite's own tables."""
    line = COMPOSITES[model_type]
    return "; ".join([*(f"{p.role}: " + (lookup(p.model_type) if p.model_type else f"its {p.key} type's") for p in line.parts),
                      *(f"{t.role.split('-')[0]}: learned table" for t in line.tables)])


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "Qwen3-Omni whole model: its thinker and code predictor are read as their own types, but its talker_config "
    "(Qwen3OmniMoeTalkerConfig, no model_type of its own in the registry) and its code2wav transformer's "
    "rotary (Qwen3OmniMoeCode2Wav, sliding-window layers) are not read yet": ("qwen3_omni_moe",),
    "PE video composites: their video encoder embeds each frame with a timm image model (video_config.vision_config, "
    "timm_wrapper), whose positions are timm's code, not read": ("pe_audio_video", "pe_video"),
    "FLAVA's multimodal encoder as a folder of its own: a class token over the text and image towers' hidden "
    "states (which carry their positions), no position table of its own; not surveyed alone (the flava "
    "composite reads its towers)": ("flava_multimodal_model",),
    "GIT: its text table is configured at the model's own top level (max_position_embeddings, "
    "position_embedding_type beside vision_config), not in a sub-config of a read type; its vision tower "
    "(git_vision_model) is read as its own type": ("git",),
    "its vision encoder (vision_config: pp_formulanet_vision, slanext_vision; SAM-style, with decomposed "
    "relative tables) is not read (PP-FormulaNet's text decoder pp_formulanet_text is)": ("pp_formulanet", "slanext"),
    "Phi-4-multimodal: its vision tower (phi4_multimodal_vision) is read as its own type, its audio tower "
    "(phi4_multimodal_audio, a learned relative bias) is not": ("phi4_multimodal",),
    "Nemotron-H-Omni: its vision tower (vision_config, radio: the grid resampled twice) is not read (its "
    "text model, nemotron_h, has no position encoding)": ("nemotron_h_omni",),
}


FAMILY = Family(tuple(COMPOSITES), read, encodings, pending=PENDING)
