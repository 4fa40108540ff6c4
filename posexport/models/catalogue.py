"""The catalogue as a user sees it: every model type posexport reads with the encodings it builds, the
types that have no positional encoding (and why), and the types not read yet (and why), so that
`posexport list --models` and docs/models.md say the same thing. ``survey`` sorts every model type of
transformers' own config registry into the three (docs/models.md is generated from it)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from . import READERS, clvp, composite, decoders, deepseek, pending, pix2struct, qwen_vl, vit

READ, NO_POSITIONS, NOT_YET = "read", "no positional encoding", "not yet"

# reader module -> the encodings it builds
READER_ENCODINGS = {
    "llama": "rope", "gemma": "rope (Gemma-3: one per layer type)", "phi3": "rope (longrope)", "neox": "rope (partial)",
    "glm": "rope (partial, interleaved pairs)", "deepseek": "rope (qk_rope_head_dim, yarn mscale)", "falcon": "rope",
    "t5": "t5 bias", "alibi": "alibi", "learned": "learned table", "swin": "swin bias",
    "swinv2": "swin bias (its table from the block's continuous-position-bias MLP)",
    "beit": "swin bias (class token)", "vit": "vit-learned", "whisper": "sinusoidal (encoder), learned (decoder)",
    "wrapper": "its text model's (text_config)", "composite": "each part's, read as the part's own type",
    "llama4": "rope, interleaved pairs, NoPE layers, query-scale",
    "gptj": "rope (partial, interleaved pairs)", "gemma4": "rope per layer type (full: proportional; the assistant's: on its queries alone)", "moonshine": "rope (partial, interleaved pairs)",
    "videoprism": "sinusoidal ([sin | cos])", "sinusoids": "sinusoidal ([sin | cos])",
    "musicgen": "sinusoidal ([cos | sin], the decoder's)",
    "time_series": "sinusoidal ([sin | cos], encoder and decoder)",
    "videomae": "sinusoidal (interleaved, over the tubelet patches; pretraining: and the decoder's)",
    "timesfm": "sinusoidal ([sin | cos], use_positional_embedding only; rows rolled past leading padding)",
    "patch_series": "learned table (the checkpoint's, per channel over the patches)",
    "vit_mae": "vit-learned with class token (its sincos-2d-initialised table); pretraining: and the decoder's learned table",
    "roformer": "rope (interleaved pairs)",
    "esm": "rope (position_embedding_type rotary) or learned table (absolute, from padding_idx + 1)",
    "decision_transformer": "learned table (episode timesteps), learned table (its GPT-2's row 0)",
    "clvp": "rope (partial, on values too) in its encoders; learned tables in its decoder and conditioning encoder",
    "audio_encoders": "learned table (max_source_positions frames)",
    "bark": "learned table (one per sub-model)", "zamba2": "rope on the hybrid layers' shared attention (use_mem_rope)",
    "recurrent_gemma": "rope (partial) on the local-attention blocks", "patch_table": "learned table (the trained token grid, not resampled)",
    "chunked_audio": "sinusoidal ([sin | cos]), restarting every audio chunk",
    "dots3_audio": "rope (partial), restarting every audio chunk",
    "siglip2": "vit-learned (antialiased bilinear at every grid)",
    "navit": "vit-learned (nearest-bucket: each patch the row of its fractional coordinate's bucket)",
    "mpnet": "learned table (from padding_idx + 1 = 2), t5 bias (bidirectional, computed once, added in every layer)",
    "pix2struct": "learned tables (row and column, its vision towers) or t5 bias (causal, its text decoder)",
    "layout": "learned tables, summed: BERT's (from 0), x (at the box's left and right edges), y (top and bottom), "
              "h (its height), w (its width)",
}

# Readers whose types differ in encodings: their own model_type -> encodings table.
TYPE_ENCODINGS = {"clvp": clvp.ENCODINGS, "pix2struct": pix2struct.ENCODINGS}

# Types with no positional encoding, each with why (pending.py).
NO_POSITION_TYPES = pending.NO_POSITIONS

# Decoder layers without rope, named by what they are where they are not plain NoPE attention.
NOPE_KINDS = {decoders.CROSS_ATTENTION: "cross-attention layers without rope",
              decoders.LINEAR_HYBRID: "linear-attention layers without rope"}

# Types not read yet, each with why (pending.py).
NOT_YET_TYPES = pending.NOT_YET


@dataclass(frozen=True)
class Entry:
    model_type: str
    status: str  # READ, NO_POSITIONS or NOT_YET
    text: str  # the encodings it builds, or why


def encodings_of(model_type: str) -> str:
    """What posexport builds for a model type it reads."""
    reader = READERS[model_type]
    if model_type in qwen_vl.TOWERS:
        return tower_encodings(qwen_vl.TOWERS[model_type])
    if reader == "qwen_vl":
        line = qwen_vl.FAMILIES[model_type]
        vision = line.vision and not model_type.endswith("_text")
        forms = [*(["interleaved sections"] if line.interleaved else []), *(["partial"] if line.partial is not None else []),
                 *(["interleaved pairs"] if line.pair_layout == "interleaved" else [])]
        return ", ".join(["mrope" + (f" ({', '.join(forms)})" if forms else ""),
                          *([tower_encodings(qwen_vl.TOWERS[f"{line.module}_vision"])] if vision else [])])
    if reader in TYPE_ENCODINGS:
        return TYPE_ENCODINGS[reader][model_type]
    if reader == "vit":
        return vit_tower_encodings(vit.FAMILIES[model_type])
    if reader == "deepseek" and model_type in deepseek.MLA and deepseek.MLA[model_type].query_scale:
        return f"{READER_ENCODINGS[reader]}, query-scale"
    if reader == "composite":
        line = composite.COMPOSITES[model_type]
        return "; ".join([*(f"{p.role}: " + (encodings_of(p.model_type) if p.model_type else f"its {p.key} type's")
                            for p in line.parts), *(f"{t.role.split('-')[0]}: learned table" for t in line.tables)])
    if reader != "decoders":
        return READER_ENCODINGS[reader]
    spec = decoders.DECODERS[model_type]
    kinds = ["rope" + (" per layer type" if isinstance(spec.theta, dict) else ""),
             *(["interleaved pairs"] if spec.pair_layout == "interleaved" else []),
             *([NOPE_KINDS.get(spec.nope, "NoPE layers")] if spec.nope else []),
             *(["heads of kv_channels"] if spec.kv_channels else []),
             *(["scaled on rope_scaling_layers, unscaled on the others"] if spec.scaling_layers else []),
             *(["layer_types as (attention, mlp) block pairs, recurrent layers looped"] if spec.paired_blocks else []),
             *(["a rope base per layer (layer_rope_theta)" if spec.layer_theta == decoders.PER_THETA
                else "NoPE layers (layer_rope_theta 0)"] if spec.layer_theta else [])]
    return ", ".join(kinds)


def vit_tower_encodings(tower: vit.Tower) -> str:
    """vit-learned, with how the tower resamples when not plain bicubic (ViT's)."""
    form = (("antialiased bilinear" if tower.antialias else "bilinear at every grid") if tower.bilinear
            else "antialiased bicubic" if tower.antialias else "bicubic by a scale factor" if tower.scale_factor else "")
    return f"vit-learned ({form})" if form else "vit-learned"


def tower_encodings(tower: qwen_vl.Tower) -> str:
    return ", ".join(["mrope-vision (axial)", *(["vit-learned pos_embed (bilinear)"] if tower.pos_embed else []),
                      *(["vit-learned grid (bicubic, by grid_sample)"] if tower.grid else [])])


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


def unknown_types() -> list[str] | None:
    """The installed transformers' model types that posexport's catalogue does not sort (None: no transformers):
    each is a release newer than the catalogue's (`make upstream` reports them)."""
    try:
        from transformers import CONFIG_MAPPING
    except ImportError:
        return None
    return sorted(t for t in CONFIG_MAPPING.keys() if t not in READERS and t not in NO_POSITION_TYPES and t not in NOT_YET_TYPES)


def render(entries: list[Entry], version: str) -> str:
    counts = {s: sum(e.status == s for e in entries) for s in (READ, NO_POSITIONS, NOT_YET)}
    in_reach = sum(e.status == NOT_YET and e.text.startswith("in reach") for e in entries)
    lines = [BEGIN, "", f"transformers {version}'s config registry (the version of the project's lock, locks/project.txt) "
             f"holds {len(entries)} model types: "
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
