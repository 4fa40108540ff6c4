"""The registry of encodings: one line each."""

from __future__ import annotations

from .base import Encoding
from .rope import RopeEncoding
from .rope2d import Rope2dEncoding
from .sincos2d import Sincos2dEncoding
from .swin import SwinEncoding
from .vit_learned import VitLearnedEncoding

ENCODINGS: dict[str, Encoding] = {
    enc.name: enc
    for enc in (
        RopeEncoding(),
        VitLearnedEncoding(),
        Sincos2dEncoding(),
        SwinEncoding(),
        Rope2dEncoding(),
    )
}
