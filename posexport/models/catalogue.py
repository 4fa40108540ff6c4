"""The catalogue as a user sees it: every model type posexport reads with the encodings it builds, the
types that have no positional encoding (and why), and the types not read yet (and why), so that
`posexport list --models` and docs/models.md say the same thing. ``survey`` sorts every model type of
transformers' own config registry into the three (docs/models.md is generated from it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from . import pending
from .families import BY_TYPE, PENDING, READERS

READ, NO_POSITIONS, NOT_YET = "read", "no positional encoding", "not yet"

_SSM = "state-space / recurrent layers: token order comes from the recurrence, no position encoding"
_HYBRID = "Mamba layers carry order; its attention layers use no position encoding"
_CONV = "convolutional: positions are implicit in the convolutions, no position encoding"
_CODEC = "convolutional audio codec or vocoder: no position encoding"
_WRAPPER = "a wrapper: its positions are those of the sub-models it composes (read each sub-model's type)"
_NOPE_LINEAR = "Kimi Linear: its linear-attention (KDA) layers carry order and its MLA layers use no rope (NoPE)"
_FRAMEWISE_AUDIO = ("an audio embedder with no attention and no convolution across frames: each frame is mapped "
                    "alone (Gemma-4-Unified: RMSNorm and a linear projection of a raw waveform frame of audio_embed_dim (640) samples; "
                    "Inkling: the sum of its quantised mel bins' codebook embeddings, RMSNorm); the frames' positions "
                    "are those the text model gives their tokens")
_CAUSAL_CONV_AUDIO = ("Muse-Spark's audio encoder: a causal convolutional pyramid (patch projections and depthwise "
                      "causal convolutions), no attention: positions are implicit in the convolutions, no position "
                      "encoding")
_PERCEIVER = ("a perceiver resampler (IDEFICS's, Idefics2's): learned latents cross-attending to the vision tower's "
              "features (which carry the tower's positions), no rotary and no position table (Idefics2's layers take "
              "position_ids=None and never use them)")
_QFORMER = ("BLIP-2's Q-Former (Blip2QFormerModel): learned query tokens (held by the model around it, not positions) "
            "through self-attention and cross-attention to image features; no token embeddings and no position code "
            "(BLIP-2's image-text retrieval model adds a BERT-like table to its text, Blip2TextEmbeddings, which the blip-2 "
            "composite does not build)")
_NO_POSITIONS_GROUPS = {
    _SSM: ("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"),
    _HYBRID: ("jamba", "nemotron_h", "zamba"),
    _CONV: ("bit", "convnext", "convnextv2", "cvt", "dinov3_convnext", "efficientnet", "focalnet", "glpn", "hgnet_v2",
            "mobilenet_v1", "mobilenet_v2", "mobilevit", "mobilevitv2", "poolformer", "pvt_v2", "regnet", "resnet",
            "segformer", "swiftformer", "textnet", "pp_lcnet", "pp_lcnet_v3", "pp_lcnet_v4", "pp_ocrv5_mobile_det",
            "pp_ocrv5_mobile_rec", "pp_ocrv5_server_det", "pp_ocrv5_server_rec", "pp_ocrv6_medium_det",
            "pp_ocrv6_small_det", "pp_ocrv6_small_rec", "pp_ocrv6_tiny_rec", "superpoint", "uvdoc", "uvdoc_backbone",
            "florence_vision"),
    _CODEC: ("dac", "encodec", "xcodec", "univnet", "wavtokenizer", "wavtokenizer_encoder",
             "vibevoice_acoustic_tokenizer", "vibevoice_acoustic_tokenizer_decoder",
             "vibevoice_acoustic_tokenizer_encoder", "qwen2_5_omni_bigvgan"),
    _WRAPPER: ("speech-encoder-decoder", "rag", "timm_backbone",
               "upernet", "vitmatte", "vitpose", "depth_anything", "prompt_depth_anything", "zoedepth", "dpr", "colpali",
               "colqwen2", "colmodernvbert", "fuyu", "tipsv2_dpt", "depth_pro", "chmv2", "nougat"),
    _NOPE_LINEAR: ("kimi_linear",),
    _FRAMEWISE_AUDIO: ("gemma4_unified_audio", "inkling_audio"),
    _CAUSAL_CONV_AUDIO: ("muse_spark_audio",),
    _QFORMER: ("blip_2_qformer",),
    _PERCEIVER: ("idefics2_perceiver", "idefics_perciever"),
}
NO_POSITION_TYPES: dict[str, str] = {t: why for why, types in _NO_POSITIONS_GROUPS.items() for t in types}

# Types not read yet, each with why: the families' reasons for their kin, and pending.py's for the others.
NOT_YET_TYPES = {**pending.NOT_YET, **PENDING}


@dataclass(frozen=True)
class Entry:
    model_type: str
    status: str  # READ, NO_POSITIONS or NOT_YET
    text: str  # the encodings it builds, or why


def encodings_of(model_type: str) -> str:
    """What posexport builds for a model type it reads: its family's line."""
    return BY_TYPE[model_type].describe(model_type, encodings_of)


def entry(model_type: str, unknown: str = "no reader yet") -> Entry:
    if model_type in READERS:
        return Entry(model_type, READ, encodings_of(model_type))
    if model_type in NO_POSITION_TYPES:
        return Entry(model_type, NO_POSITIONS, NO_POSITION_TYPES[model_type])
    return Entry(model_type, NOT_YET, NOT_YET_TYPES.get(model_type, unknown))


def catalogue() -> list[Entry]:
    """Every model type posexport reads, with its encodings (`posexport list --models`)."""
    return [entry(t) for t in sorted(READERS)]


def survey(model_types: Iterable[str]) -> list[Entry]:
    """Each model type sorted into read, no positional encoding, or not yet."""
    return [entry(t) for t in sorted(model_types)]


# --- docs/models.md's generated section: `python -m posexport.models.catalogue docs/models.md` -------

BEGIN, END = "<!-- catalogue:begin (generated by python -m posexport.models.catalogue docs/models.md) -->", "<!-- catalogue:end -->"
HINTS = (("class \\w*RotaryEmbedding", "its modeling code has a rotary embedding"),
         ("relative_attention_bias|relative_position_bias", "its modeling code has a relative position bias"),
         ("position_embeddings|embed_positions|wpe\\b|pos_embed", "its modeling code has a position table"))


def code_hint(model_type: str) -> str:
    """What transformers' modeling code of a type holds, for a type not read yet (a generator aid)."""
    import importlib.util
    import re
    from pathlib import Path

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    spec = importlib.util.find_spec(f"transformers.models.{model_type_to_module_name(model_type)}")
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    source = "\n".join(f.read_text() for f in folder.glob("modeling_*.py")) if folder else ""
    return next((hint for pattern, hint in HINTS if re.search(pattern, source)), "no position code recognised")


def registry_survey() -> list[Entry]:
    """Every model type of the installed transformers' CONFIG_MAPPING, sorted (needs transformers)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return [e if e.status != NOT_YET or e.model_type in NOT_YET_TYPES else Entry(e.model_type, NOT_YET, f"no reader yet: {code_hint(e.model_type)}")
            for e in survey(CONFIG_MAPPING_NAMES)]


def render(entries: list[Entry], version: str) -> str:
    counts = {s: sum(e.status == s for e in entries) for s in (READ, NO_POSITIONS, NOT_YET)}
    in_reach = sum(e.status == NOT_YET and e.text.startswith("in reach") for e in entries)
    lines = [BEGIN, "", f"transformers {version}'s config registry holds {len(entries)} model types: "
             f"**{counts[READ]} read**, **{counts[NO_POSITIONS]} with no positional encoding**, "
             f"**{counts[NOT_YET]} not yet** ({in_reach} of them in reach: a form posexport models, waiting for "
             "its reader line).", "", "| model_type | status | encodings, or why |", "|---|---|---|"]
    lines += [f"| {e.model_type} | {e.status} | {e.text} |" for e in entries]
    return "\n".join([*lines, "", END])


def rewrite(page: str, section: str) -> str:
    """The page with its generated section replaced (appended when it has none)."""
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        return head + section + rest.split(END, 1)[1]
    return page.rstrip("\n") + "\n\n## Every model type of transformers\n\n" + section + "\n"


def main(path: str) -> None:
    import importlib.metadata
    from pathlib import Path

    page = Path(path)
    page.write_text(rewrite(page.read_text(), render(registry_survey(), importlib.metadata.version("transformers"))))


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
