"""How a rope graph is expressed (DESIGN 5). Encodings other than rope have one expression: portable."""

from __future__ import annotations

from .errors import PosexportError

# Standard ONNX ops only; runs on every runtime from opset 17.
PORTABLE = "portable"
BACKENDS: dict[str, str] = {
    PORTABLE: "standard ONNX ops only (opset 17+), runs on every runtime",
}
AUTO = "auto"


def resolve_backend(name: str, family: str, opset: int) -> str:
    """The concrete backend for a build: `auto` picks the fastest one the opset supports."""
    if name == AUTO:
        return PORTABLE
    if name not in BACKENDS:
        raise PosexportError(f"--backend {name!r}: unknown backend; choose one of {AUTO}, {', '.join(BACKENDS)}")
    if family != "rope" and name != PORTABLE:
        raise PosexportError(f"--backend {name}: only rope graphs have backends; use --backend portable")
    return name
