"""Multimodal wrappers (LLaVA, PaliGemma, Mistral-3, Aya Vision, LFM2-VL, Idefics3, InternVL, Voxtral,
Qwen2-Audio, …): a vision or audio tower and a projector in front of a language model whose config is
`text_config`, with a model_type of its own. The text model's encodings are read by that type's reader,
exactly as a folder of that type; the towers' positions are not built (a note says so)."""

from __future__ import annotations

import dataclasses
import importlib

from .config import ModelConfig
from .plan import Role
from .rope_family import BESIDE_TEXT

NOTE = "the language model's positions (text_config, model_type {inner}); the other towers' own (vision, audio) are not built"


def read(cfg: ModelConfig) -> list[Role]:
    from . import READERS, not_read

    data = cfg.get("text_config")
    cfg.ignore(*BESIDE_TEXT)
    inner = data.get("model_type") if isinstance(data, dict) else None
    if inner not in READERS or READERS[inner] == "wrapper":
        cfg.fail("text_config.model_type", inner, f"the text model is not read: {not_read(inner)}" if isinstance(inner, str)
                 else "the text model's model_type is missing")
    text = ModelConfig(data, inner, f"{cfg.source} text_config", cfg.folder)
    roles = importlib.import_module(f"{__package__}.{READERS[inner]}").read(text)
    text.check_all_read()
    return [dataclasses.replace(r, notes=(*r.notes, NOTE.format(inner=inner)), hf={**r.hf, "text_config": True})
            for r in roles]
