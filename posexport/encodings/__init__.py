"""The registry of encodings: one line each."""

from __future__ import annotations

from .base import Encoding
from .learned import LearnedEncoding
from .rope import RopeEncoding
from .sinusoidal import SinusoidalEncoding

ENCODINGS: dict[str, Encoding] = {
    enc.name: enc
    for enc in (
        RopeEncoding(),
        SinusoidalEncoding(),
        LearnedEncoding(),
    )
}
