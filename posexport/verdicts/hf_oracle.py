"""`hf-float64`: a transformers model as the oracle of whole-model parity.

Weights and every layer run in float64, and each rotary module's cos/sin are formed from float64 angles
(transformers forms them in float32). The frequencies come from posexport's scalings for each rope the
model uses (Gemma-3's local and global ones alike) and are checked, on every call, against the module's
own: a misread config fails loudly instead of agreeing with itself. The oracle returns the logits and
every layer's key and value cache (the rotated keys carry the positions directly), named by
:func:`cache_slot`, and takes the same seeded past key/values as the model under test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import checkpoint, params as params_mod
from ..errors import PosexportError, one_line
from ..models import read_model
from ..rope.encoding import RopeParams, inv_freq_and_factor

NAME = "hf-float64"
AGREEMENT = 1e-5  # relative, against transformers' float32 frequencies
# A cache tensor of any exporter: present.0.key, present_key_values.0.value, cache.layers.0.keys,
# output.cache.layers.0.keys; past_key_values.0.key, input.cache.layers.0.keys (inputs); the decoder's
# self-attention of encoder-decoder models is not matched.
CACHE = re.compile(r"(present|past|cache)\D*?(\d+)\D*?(key|value)s?$")


def cache_slot(name: str) -> str | None:
    """'key.L' / 'value.L' for a cache tensor of layer L (any exporter's naming), else None."""
    match = CACHE.search(name.lower())
    return f"{match.group(3)}.{int(match.group(2))}" if match and "encoder" not in name.lower() else None


def their_frequencies(module: Any, layer_type: str | None, seq_len: int) -> tuple[np.ndarray, float]:
    """The rotary module's own inverse frequencies and attention factor for this call (float64 numpy)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    prefix = f"{layer_type}_" if layer_type is not None else ""
    rope_type = module.rope_type[layer_type] if layer_type is not None else module.rope_type
    if rope_type in ("dynamic", "longrope"):
        extra = {"layer_type": layer_type} if layer_type is not None else {}
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](module.config, None, seq_len=seq_len, **extra)
    else:
        inv_freq, factor = getattr(module, f"{prefix}original_inv_freq"), getattr(module, f"{prefix}attention_scaling")
    return inv_freq.double().numpy(), float(factor)


def agreeing(candidates: list[RopeParams], theirs: np.ndarray, their_factor: float, seq_len: int) -> tuple[np.ndarray, float]:
    """posexport's float64 frequencies and factor of the candidate rope that the module's agree with."""
    for p in candidates:
        inv_freq, factor = inv_freq_and_factor(p, seq_len)
        if inv_freq.shape == theirs.shape and np.max(np.abs(theirs / inv_freq - 1)) <= AGREEMENT \
                and abs(their_factor - factor) <= AGREEMENT * factor:
            return inv_freq, factor
    raise PosexportError(f"posexport reads this config's rope differently from transformers (its frequencies "
                         f"start {theirs[:3]}, factor {their_factor:g}; posexport read {len(candidates)} rope(s) of it)")


def pair_like(angles: Any, theirs: Any) -> Any:
    """Angles [.., r/2] laid out as the module lays out its cos: halves (cat) or interleaved pairs."""
    import torch

    for emb in (torch.cat((angles, angles), dim=-1), torch.repeat_interleave(angles, 2, dim=-1)):
        if emb.shape == theirs.shape and float((emb.cos() - theirs.double()).abs().max()) < 0.1:
            return emb
    raise PosexportError("the model's rotary module lays out cos/sin in a way the float64 oracle does not know")


def exact_forward(module: Any, candidates: list[RopeParams]) -> Any:
    """A forward for a transformers rotary module returning cos/sin formed from float64 angles."""
    import torch

    original = module.forward

    def forward(x: Any, position_ids: Any, layer_type: Any = None) -> tuple[Any, Any]:
        seq_len = int(position_ids.max()) + 1
        theirs, their_factor = their_frequencies(module, layer_type, seq_len)
        inv_freq, factor = agreeing(candidates, theirs, their_factor, seq_len)
        their_cos, _ = original(x, position_ids, **({"layer_type": layer_type} if layer_type is not None else {}))
        emb = pair_like(position_ids[..., None].double() * torch.from_numpy(inv_freq), their_cos / max(their_factor, 1e-30))
        return (emb.cos() * factor).to(x.dtype), (emb.sin() * factor).to(x.dtype)

    return forward


def table_frequencies(module: Any) -> np.ndarray:
    """The frequencies of a sin|cos table module (GPT-J's embed_positions): the angles of its row 1."""
    row = module.embed_positions[1].double().numpy()
    half = len(row) // 2
    return np.arctan2(row[:half], row[half:])


def exact_table_forward(module: Any, candidates: list[RopeParams]) -> Any:
    """A forward for a rotary module that reads a sin|cos table (GPT-J's), returning its (sin, cos) rows
    from float64 angles at any position: the module's own table stops at max_position_embeddings."""
    import torch

    inv_freq = torch.from_numpy(agreeing(candidates, table_frequencies(module), 1.0, 1)[0])

    def forward(x: Any, position_ids: Any) -> tuple[Any, Any]:
        angles = position_ids[..., None].double() * inv_freq
        return angles.sin().to(x.dtype), angles.cos().to(x.dtype)

    return forward


class HfOracle:
    """The transformers model of ``directory`` in float64, as a runner: feeds in, outputs by slot name
    ('logits', 'key.L', 'value.L')."""

    name = NAME

    def __init__(self, directory: str | Path):
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # transformers' own bars would interleave with the report
        self.directory = Path(directory)
        ropes = [params_mod.build(RopeParams, dict(role.values)) for role in read_model(self.directory).roles if role.encoding == "rope"]
        if not ropes:
            raise PosexportError(f"--against-hf {self.directory}: the model uses no rope the float64 oracle can make exact")
        checkpoint.weight_files(self.directory)  # contained, regular, in budget, before transformers opens any
        try:
            self.model = AutoModelForCausalLM.from_pretrained(str(self.directory), dtype=torch.float64).eval()
        except (OSError, ValueError, KeyError, RuntimeError) as e:  # transformers' refusals, often several lines
            raise PosexportError(f"--against-hf {self.directory}: transformers cannot load it ({one_line(e, 300)})") from None
        rotary = [m for m in self.model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
        if not rotary:
            raise PosexportError(f"--against-hf {self.directory}: the model has no rotary embedding module posexport can make exact")
        for module in rotary:
            exact = exact_table_forward if hasattr(module, "embed_positions") else exact_forward
            module.forward = exact(module, ropes)
        self.label = f"transformers {self.directory.name} (float64)"

    def past(self, feeds: Mapping[str, np.ndarray]) -> Any:
        """The feeds' past key/values as transformers' cache (None when there are none)."""
        import torch
        from transformers import DynamicCache

        slots = {cache_slot(name): value for name, value in feeds.items() if cache_slot(name)}
        layers = sorted({int(slot.split(".")[1]) for slot in slots})
        if not layers or not any(v.size for v in slots.values()):
            return None
        if layers != list(range(len(layers))) or any(f"{kind}.{n}" not in slots for n in layers for kind in ("key", "value")):
            raise PosexportError(f"the model's past key/values name layers {layers}: cannot map them to transformers' cache")
        pairs = [tuple(torch.from_numpy(slots[f"{kind}.{n}"].astype(np.float64)) for kind in ("key", "value")) for n in layers]
        return DynamicCache(ddp_cache_data=pairs, config=self.model.config)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        ids = torch.from_numpy(feeds["input_ids"])
        cache = self.past(feeds)
        past = cache.get_seq_length() if cache is not None else 0
        kwargs: dict[str, Any] = {"attention_mask": torch.ones((ids.shape[0], past + ids.shape[1]), dtype=torch.int64)}
        kwargs["position_ids"] = (torch.from_numpy(feeds["position_ids"]) if "position_ids" in feeds
                                  else torch.arange(past, past + ids.shape[1])[None].expand(ids.shape[0], -1))
        with torch.no_grad():
            out = self.model(input_ids=ids, past_key_values=cache, use_cache=True, **kwargs)
        result = {"logits": out.logits.numpy()}
        for n, layer in enumerate(out.past_key_values.layers):
            result[f"key.{n}"], result[f"value.{n}"] = layer.keys.numpy(), layer.values.numpy()
        return result
