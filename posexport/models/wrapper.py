"""Multimodal wrappers (LLaVA, PaliGemma, Mistral-3, Aya Vision, LFM2-VL, Idefics3, InternVL, Voxtral,
Qwen2-Audio, …): a vision or audio tower and a projector in front of a language model whose config is
`text_config`, with a model_type of its own. The text model's encodings are read by that type's reader,
exactly as a folder of that type; the towers' positions are not built (a note says so)."""

from __future__ import annotations

import dataclasses

from .config import ModelConfig
from .family import Family
from .plan import Role
from .rope_family import BESIDE_TEXT

# The wrapper types it reads.
WRAPPERS = ("llava", "llava_next", "llava_next_video", "llava_onevision", "vipllava", "video_llava", "aya_vision",
            "paligemma", "shieldgemma2", "lfm2_vl", "mistral3", "cohere2_vision", "perception_lm", "fast_vlm",
            "lighton_ocr", "deepseek_vl", "deepseek_vl_hybrid", "apertus1p5", "audioflamingo3", "cosmos3_omni", "exaone4_5",
            "got_ocr2", "granite_docling", "granite_speech", "granite_speech_plus", "hyperclovax_vision_v2", "idefics2",
            "idefics3", "internvl", "janus", "jev", "kimi_k25", "lfm3_vl", "minicpm_ocr", "minicpmv4_6", "minicpmv4_7",
            "modernvbert", "moss_transcribe_diarize", "omniasr", "ovis2", "pp_chart2table", "qianfan_ocr", "qwen2_audio",
            "qwen3_asr", "smolvlm", "ultravbert", "vibevoice", "vibevoice_asr", "video_llama_3", "voxtral", "florence2",
            "paddleocr_vl", "cosmos3_edge", "llava_onevision1_5", "ovis2_5")
NOTE = "the language model's positions (text_config, model_type {inner}); the other towers' own (vision, audio) are not built"


def read(cfg: ModelConfig) -> list[Role]:
    data = cfg.get("text_config")
    cfg.ignore(*BESIDE_TEXT)
    inner = data.get("model_type") if isinstance(data, dict) else None
    family = cfg.catalogue.families.get(inner)
    if family is None or family.read is read:
        cfg.fail("text_config.model_type", inner, f"the text model is not read: {cfg.catalogue.why_not(inner)}"
                 if isinstance(inner, str) else "the text model's model_type is missing")
    text = ModelConfig(data, inner, f"{cfg.source} text_config", cfg.folder, catalogue=cfg.catalogue)
    roles = family.read(text)
    text.check_all_read()
    return [dataclasses.replace(r, notes=(*r.notes, NOTE.format(inner=inner)), hf=dataclasses.replace(r.hf, text_config=True))
            for r in roles]


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "PI0: its vision-language part (vlm_config) is a PaliGemma, read through its text_config only (wrapper.py: "
    "its SigLIP grid is not built), beside a Gemma action expert (dit_config); not read as a composite yet": ("pi0",),
}


FAMILY = Family(WRAPPERS, read, "its text model's (text_config)", pending=PENDING)
