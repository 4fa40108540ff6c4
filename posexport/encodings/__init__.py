"""The registry of encodings: one line each."""

from __future__ import annotations

from .alibi import AlibiEncoding
from .base import Encoding
from .learned import LearnedEncoding
from .rope import RopeEncoding
from .sinusoidal import SinusoidalEncoding
from .t5 import T5Encoding

ENCODINGS: dict[str, Encoding] = {
    enc.name: enc
    for enc in (
        RopeEncoding(),
        SinusoidalEncoding(),
        LearnedEncoding(),
        T5Encoding(),
        AlibiEncoding(),
    )
}
