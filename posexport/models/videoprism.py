"""VideoPrism's text tower (`videoprism_text_model`): VideoPrismTextEmbeddings adds a fixed sinusoid,
transformers' `create_sinusoidal_positions(max_position_embeddings, hidden_size)`: ω_i = 10000^(−2i/d), laid
out [sin | cos], rows at position_ids 0 … seq − 1, to the token embeddings scaled by √hidden_size; the class
embedding it appends after the tokens takes no position. That is posexport's sinusoidal encoding, base 10000,
all sines first (`--pair-layout concat`)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import SinusoidTableRecipe

MODULE = "transformers.models.videoprism.modeling_videoprism"


def read(cfg: ModelConfig) -> list[Role]:
    d = cfg.number("hidden_size", 768, integer=True)
    if d % 2 or d < 2:
        cfg.fail("hidden_size", d, "the sinusoid needs an even hidden_size")
    rows = cfg.count("max_position_embeddings", 64)
    notes = ("x is the token embeddings times √hidden_size [batch, seq, hidden]; position_ids are 0 … seq − 1",
             f"the model's table holds max_position_embeddings = {rows} rows; the graph is exact past them too; the "
             "class embedding appended after the tokens takes no position (outside this graph)")
    return [Role("sinusoidal", "sinusoidal", {"d_model": d, "base": 10000.0, "pair_layout": "concat"}, (), notes,
                 SinusoidTableRecipe(module=MODULE, create="create_sinusoidal_positions"))]


# Its kin not read yet, and why (the catalogue's "not yet").
PENDING: dict[str, tuple[str, ...]] = {
    "VideoPrism: its text tower (videoprism_text_model) is read, its vision tower (videoprism_vision_model: "
    "spatial and temporal tables) is not": ("videoprism",),
}


FAMILY = Family(("videoprism_text_model",), read, "sinusoidal ([sin | cos])", pending=PENDING)
