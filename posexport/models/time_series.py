"""Time-series encoder-decoders (`time_series_transformer`, `informer`, `autoformer`): each part adds Marian's fixed
sinusoid (<X>SinusoidalPositionalEmbedding, a frozen table of context_length + prediction_length rows,
ω_i = 10000^(−2i/d), laid out [sin | cos]) to its value embedding, before the embedding layer norm. That is
posexport's sinusoidal encoding, base 10000, `--pair-layout concat` (as Marian's, sinusoids.py). The value
embedding is a linear map of the lagged values and the covariates: the time features (calendar covariates,
age) it takes are inputs, not a position code. The encoder's position_ids are 0 … context_length − 1; the
decoder's continue from context_length (Autoformer's from context_length − label_length: its decoder re-reads
the last label_length steps of the context). Autoformer's series decomposition splits values, not positions."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .sinusoids import VASWANI

# model_type -> whether its decoder starts label_length steps back (Autoformer)
FAMILIES = {"time_series_transformer": False, "informer": False, "autoformer": True}


def decoder_start(cfg: ModelConfig) -> int:
    """The decoder's first position_id: context_length, Autoformer's context_length − label_length."""
    context = cfg.count("context_length", cfg.count("prediction_length"))
    if not FAMILIES[cfg.architecture]:
        return context
    label = cfg.number("label_length", 10, integer=True)
    if not 0 <= label <= context:
        cfg.fail("label_length", label, f"the decoder's positions would start at context_length − label_length = "
                                        f"{context - label}, a row the model's table does not have")
    return context - label


def read(cfg: ModelConfig) -> list[Role]:
    d = cfg.count("d_model", 64)
    if d % 2 or d < 2:
        cfg.fail("d_model", d, "the model's table gives an odd width one sine more than cosines; posexport's "
                               "sinusoid needs an even d_model")
    predicted = cfg.count("prediction_length")
    context = cfg.count("context_length", predicted)
    start = decoder_start(cfg)
    notes = ("x is each part's value embedding [batch, steps, d_model] (before the embedding layer norm); the "
             f"encoder's position_ids are 0 … {context - 1} (context_length steps), the decoder's {start} onwards"
             + (" (context_length − label_length)" if FAMILIES[cfg.architecture] else " (from context_length)"),
             f"the model's table holds context_length + prediction_length = {context + predicted} rows; the graph is "
             "exact past them too; the time features are inputs of the value embedding, not positions")
    return [Role("sinusoidal", "sinusoidal", {"d_model": d, "base": 10000.0, "pair_layout": "concat"}, (), notes, VASWANI)]


FAMILY = Family(tuple(FAMILIES), read, "sinusoidal ([sin | cos], encoder and decoder)")
