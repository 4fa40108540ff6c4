"""Name -> encoding. Adding an encoding is its own module plus one line in ``ENCODINGS``.

Entries name the module that defines the encoding, which is imported when the encoding is first used:
`posexport list` and every command's `--help` read the entries alone and never import torch or onnxscript (an
encoding's own options, `--encoding NAME --help`, load that encoding).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .encodings.base import Encoding
from .errors import PosexportError, unknown


@dataclass(frozen=True)
class Entry:
    name: str
    module: str  # defines ENCODING, the Encoding instance
    summary: str
    # An encoding defined elsewhere (a plugin, a test) is registered as it is.
    instance: Encoding | None = None

    def load(self) -> Encoding:
        return self.instance or importlib.import_module(self.module).ENCODING


ENCODINGS: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry("rope", "posexport.rope.encoding", "rotary position embedding (RoPE) of q/k, with partial rotary and scalings"),
        Entry("sinusoidal", "posexport.encodings.sinusoidal", "sinusoidal absolute position encoding (Vaswani et al.) added to x"),
        Entry("learned", "posexport.encodings.learned", "learned absolute position table (trained --weights or seeded N(0, 0.02)) added to x"),
        Entry("t5", "posexport.encodings.t5", "T5 bucketed relative position bias added to attention scores (encoder or causal decoder)"),
        Entry("alibi", "posexport.encodings.alibi", "ALiBi linear attention bias (causal or symmetric), no learned parameters"),
        Entry("vit-learned", "posexport.encodings.vit_learned", "ViT learned grid positions, bicubic-antialias resampled in the graph to any grid"),
        Entry("sincos-2d", "posexport.encodings.sincos2d", "2-D sine-cosine grid positions (MAE): column half then row half, any grid"),
        Entry("swin", "posexport.encodings.swin", "Swin window relative position bias added to attention scores"),
        Entry("mrope", "posexport.rope.mrope", "multimodal RoPE (Qwen2-VL): frequency sections turned by temporal, height and width position rows"),
        Entry("rope-2d", "posexport.encodings.rope2d", "2-D axial RoPE on a patch grid: row half and column half rotated, any grid"),
        Entry("query-scale", "posexport.encodings.query_scale", "position-dependent query scaling 1 + β·ln(1 + ⌊(p + offset)/F⌋) (Llama-4 NoPE layers, Ministral-3)"),
    )
}


def entry(name: str) -> Entry:
    """The registry entry of ``name``, without importing the encoding: a mistyped name is answered at once."""
    try:
        return ENCODINGS[name]
    except KeyError:
        raise PosexportError(unknown("--encoding", name, "encoding", list(ENCODINGS))) from None


def get_encoding(name: str) -> Encoding:
    return entry(name).load()


def register(encoding: Encoding, summary: str) -> None:
    """Add an encoding defined elsewhere (a plugin, a test): build, list, parity and bench pick it up."""
    ENCODINGS[encoding.name] = Entry(encoding.name, type(encoding).__module__, summary, encoding)


def list_encodings() -> list[Encoding]:
    return [entry.load() for entry in ENCODINGS.values()]


def summary(name: str) -> str:
    return ENCODINGS[name].summary
