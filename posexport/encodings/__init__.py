"""The registry of encodings: one line each."""

from __future__ import annotations

from .alibi import AlibiEncoding
from .base import Encoding
from .learned import LearnedEncoding
from .rope import RopeEncoding
from .rope2d import Rope2dEncoding
from .sincos2d import Sincos2dEncoding
from .sinusoidal import SinusoidalEncoding
from .swin import SwinEncoding
from .t5 import T5Encoding
from .vit_learned import VitLearnedEncoding

ENCODINGS: dict[str, Encoding] = {
    enc.name: enc
    for enc in (
        RopeEncoding(),
        SinusoidalEncoding(),
        LearnedEncoding(),
        T5Encoding(),
        AlibiEncoding(),
        VitLearnedEncoding(),
        Sincos2dEncoding(),
        SwinEncoding(),
        Rope2dEncoding(),
    )
}
