"""The exact positional encoding of a published model, read from its folder (config.json and, where the
encoding has trained tables, its weights) the way transformers reads it.

    plan = read_model("path/to/model")      # ModelPlan: the model's distinct encodings ("roles")
    built = build_model(plan)              # one Artifact per role (posexport.models.build)

Adding an architecture is its reader module (``read(cfg: ModelConfig) -> list[Role]``) plus one line in
``READERS``. Every config key that speaks of positions is read or is an error naming it (config.py).
"""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path

from ..errors import PosexportError
from ..registry import get_encoding
from ..upstream import CHECKED_TRANSFORMERS, installed_transformers, versions_note
from . import (audio_encoders, chunked_audio, config, decoders, deepseek, learned, musicgen, navit, patch_series, patch_table,
               pending, pix2struct, qwen_vl, sinusoids, swin, swinv2, t5, time_series, vit)
from .plan import LINEAR_ATTENTION, ModelPlan, Role, has_attention

# Multimodal wrappers (vision, audio or speech towers before a language model) read through their
# text_config's own model_type (wrapper.py).
WRAPPERS = ("llava", "llava_next", "llava_next_video", "llava_onevision", "vipllava", "video_llava", "aya_vision",
            "paligemma", "shieldgemma2", "lfm2_vl", "mistral3", "cohere2_vision", "perception_lm", "fast_vlm",
            "lighton_ocr", "deepseek_vl", "deepseek_vl_hybrid", "apertus1p5", "audioflamingo3", "cosmos3_omni", "exaone4_5",
            "got_ocr2", "granite_docling", "granite_speech", "granite_speech_plus", "hyperclovax_vision_v2", "idefics2",
            "idefics3", "internvl", "janus", "jev", "kimi_k25", "lfm3_vl", "minicpm_ocr", "minicpmv4_6", "minicpmv4_7",
            "modernvbert", "moss_transcribe_diarize", "omniasr", "ovis2", "pp_chart2table", "qianfan_ocr", "qwen2_audio",
            "qwen3_asr", "smolvlm", "ultravbert", "vibevoice", "vibevoice_asr", "video_llama_3", "voxtral", "florence2",
            "paddleocr_vl", "cosmos3_edge", "llava_onevision1_5", "ovis2_5")
# Composites whose parts are read as their own types, each by its line in composite.py (which reads them
# through READERS, so this registry names them).
COMPOSITES = ("clip", "siglip", "siglip2", "metaclip_2", "owlvit", "owlv2", "groupvit", "aimv2", "clipseg", "chinese_clip",
              "altclip", "blip", "bridgetower", "tipsv2", "xclip", "vision-text-dual-encoder", "encoder-decoder",
              "vision-encoder-decoder", "kosmos-2", "flava", "align", "clap", "dia", "t5gemma", "blt", "fun_asr_nano",
              "pe_audio", "qwen2_5_omni_thinker", "qwen3_omni_moe_thinker", "qwen2_5_omni_token2wav", "qwen2_5_omni",
              "blip-2", "instructblip", "instructblipvideo", "pix2struct", "kosmos-2.5", "pi05")
# config.json's model_type -> the module (in this package) that reads it.
READERS: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "llama",
    "qwen2": "llama",
    "qwen2_moe": "llama",
    "qwen3": "llama",
    "qwen3_moe": "llama",
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "gemma3_text": "gemma",
    "phi3": "phi3",
    "llama4": "llama4",
    "gptj": "gptj",
    "codegen": "gptj",
    "moonshine": "moonshine",
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
    "gemma4_assistant": "gemma4",
    "llama4_text": "llama4",
    "gpt_neox": "neox",
    "stablelm": "neox",
    "glm": "glm",
    "glm4": "glm",
    "deepseek_v2": "deepseek",
    "falcon": "falcon",
    "bloom": "alibi",
    "mpt": "alibi",
    "qwen2_vl": "qwen_vl",
    "qwen2_5_vl": "qwen_vl",
    "qwen2_vl_text": "qwen_vl",
    "qwen2_5_vl_text": "qwen_vl",
    "qwen3_vl": "qwen_vl",
    "qwen3_vl_text": "qwen_vl",
    "qwen3_vl_moe": "qwen_vl",
    "qwen3_vl_moe_text": "qwen_vl",
    "paddleocr_vl_text": "qwen_vl",
    "cosmos3_edge_text": "qwen_vl",
    "qwen2_5_omni_text": "qwen_vl",
    "qwen3_omni_moe_text": "qwen_vl",
    "qwen3_omni_moe_talker_text": "qwen_vl",
    "qwen2_5_omni_talker": "qwen_vl",
    "qwen3_omni_moe_talker_code_predictor": "llama",
    **dict.fromkeys(qwen_vl.TOWERS, "qwen_vl"),
    **dict.fromkeys(("glm4v", "glm4v_text", "glm_ocr", "glm_ocr_text", "glm46v", "glmga", "glm4v_moe", "glm4v_moe_text",
                     "glm_image", "glm_image_text"), "qwen_vl"),
    **dict.fromkeys(swin.FAMILIES, "swin"),
    **dict.fromkeys(swinv2.FAMILIES, "swinv2"),
    "beit": "beit",
    "data2vec-vision": "beit",
    "whisper": "whisper",
    "roformer": "roformer",
    "esm": "esm",
    "decision_transformer": "decision_transformer",
    "mpnet": "mpnet",
    "layoutlm": "layout",
    **dict.fromkeys(("clvp", "clvp_encoder", "clvp_decoder"), "clvp"),
    "bark": "bark",
    "videoprism_text_model": "videoprism",
    "zamba2": "zamba2",
    "recurrent_gemma": "recurrent_gemma",
    "videomae": "videomae",
    "timesfm": "timesfm",
    "vit_mae": "vit_mae",
    "siglip2_vision_model": "siglip2",
    **dict.fromkeys(decoders.DECODERS, "decoders"),
    **dict.fromkeys(deepseek.MLA, "deepseek"),
    **dict.fromkeys(learned.TABLES, "learned"),
    **dict.fromkeys(learned.BART_LIKE, "learned"),
    **dict.fromkeys(vit.FAMILIES, "vit"),
    **dict.fromkeys(patch_table.FAMILIES, "patch_table"),
    **dict.fromkeys(navit.FAMILIES, "navit"),
    **dict.fromkeys(pix2struct.FAMILIES, "pix2struct"),
    **dict.fromkeys(t5.FAMILIES, "t5"),
    **dict.fromkeys(sinusoids.FAMILIES, "sinusoids"),
    **dict.fromkeys(audio_encoders.FAMILIES, "audio_encoders"),
    **dict.fromkeys(chunked_audio.FAMILIES, "chunked_audio"),
    "dots3_note_audio_encoder": "dots3_audio",
    **dict.fromkeys(musicgen.FAMILIES, "musicgen"),
    **dict.fromkeys(time_series.FAMILIES, "time_series"),
    **dict.fromkeys(patch_series.FAMILIES, "patch_series"),
    **dict.fromkeys(WRAPPERS, "wrapper"),
    **dict.fromkeys(COMPOSITES, "composite"),
}


def supported_architectures() -> list[str]:
    return sorted(READERS)


def read_model(folder: str | Path) -> ModelPlan:
    """The model's distinct encodings, or one error line naming what posexport cannot read exactly."""
    folder = Path(folder)
    data = config.load(folder)
    source = str(folder / "config.json")
    architecture = data.get("model_type")
    if not isinstance(architecture, str):
        raise PosexportError(f"{source}: no model_type (a string naming the architecture, as transformers writes it); "
                             "`posexport list --models` shows the types posexport reads")
    if architecture not in READERS:
        raise PosexportError(f"{source}: {not_read(architecture)}")
    cfg = config.ModelConfig(data, architecture, source, folder)
    roles = importlib.import_module(f"{__name__}.{READERS[architecture]}").read(cfg)
    cfg.check_all_read()
    for role in roles:
        judged(role, source)
    count, without, linear = layer_info(data)
    return ModelPlan(architecture, folder, tuple(roles), count, without, linear)


def not_read(architecture: str) -> str:
    """Why posexport reads no encoding from this model_type, in one line: no positional encoding, not read yet
    (and why), new to posexport (a transformers release newer than the one it was checked against), or no
    transformers type at all (and the nearest one posexport reads)."""
    if architecture in pending.NO_POSITIONS:
        return f"model_type {architecture!r} has no positional encoding to build: {pending.NO_POSITIONS[architecture]}"
    if architecture in pending.NOT_YET:
        return f"model_type {architecture!r} is not read yet: {pending.NOT_YET[architecture]}"
    if transformers_registers(architecture):
        return (f"model_type {architecture!r} is new to posexport: transformers {installed_transformers()} registers it; "
                f"posexport's catalogue, checked against transformers {CHECKED_TRANSFORMERS}, does not know it "
                "(`posexport list --models` shows what it reads)")
    near = difflib.get_close_matches(architecture, READERS, n=1)
    return (f"model_type {architecture!r} is not a transformers model type posexport knows"
            f"{f' (did you mean {near[0]!r}?)' if near else ''}; {versions_note()}; `posexport list --models` shows "
            "the types it reads")


def transformers_registers(architecture: str) -> bool:
    """Whether the installed transformers (if any) has a config class for this model_type."""
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return False
    return architecture in CONFIG_MAPPING


def judged(role: Role, source: str) -> None:
    """A role's values judged as `build` judges them (the encoding's own parameter checks), so that
    doctor, patch, --against-hf and build refuse one config with the same words."""
    try:
        get_encoding(role.encoding).params(**role.values)
    except PosexportError as e:
        raise PosexportError(f"{source}: {role.role}: {e}") from None


def griffin_types(config: dict, count: int) -> list[str] | None:
    """RecurrentGemma's layer types as its config class names them: block_types cycled over the layers, its
    recurrent blocks linear_attention and its attention blocks sliding_attention."""
    kinds = config.get("block_types")
    if not isinstance(kinds, list) or not kinds:
        return None
    return ["linear_attention" if kinds[i % len(kinds)] == "recurrent" else "sliding_attention" for i in range(count)]


def layer_info(data: dict) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """num_hidden_layers (GPT-J: n_layer; a Qwen-VL vision tower's own config: depth) of the config or of its text_config (0 when neither says), the layers its
    layer_types names as something other than attention (LFM2's conv layers, Mamba layers), and its
    linear-attention layers."""
    for part in (data, data.get("text_config")):
        count = (part.get("num_hidden_layers") or part.get("n_layer") or part.get("depth")) if isinstance(part, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            types = part.get("layer_types") or part.get("layers_block_type") or griffin_types(part, count)
            if isinstance(types, list) and "mlp" in types:  # Dory's (attention, mlp) block pairs
                types, count = types[::2], count // 2
            types = [t if isinstance(t, str) else "" for t in types] if isinstance(types, list) and len(types) == count else []
            return (count, tuple(i for i, t in enumerate(types) if not has_attention(t)),
                    tuple(i for i, t in enumerate(types) if t == LINEAR_ATTENTION))
    return 0, (), ()
