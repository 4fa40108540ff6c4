"""`hf-float64`: a transformers model as the oracle of whole-model parity.

Weights and every layer run in float64, and each rotary module's cos/sin are formed from float64 angles
(transformers forms them in float32). The frequencies come from posexport's scalings for each rope the
model uses (Gemma-3's local and global ones alike) and are checked, on every call, against the module's
own: a misread config fails loudly instead of agreeing with itself. The oracle returns the logits and
every layer's key and value cache (the rotated keys carry the positions directly), named by
:func:`cache_slot`, and takes the same seeded past key/values as the model under test.

The same model in float32, its cos/sin still from float64 angles, is the **floor**: what transformers' own
float32 forward gives on the same feeds, which no export of it can be expected to beat. Logits are never
formed whole: the body's last hidden states are kept, and any rows of logits are made from them by the
model's own head (its ``forward`` fed those hidden states, so a softcap or a logit scale is its own).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
# Any other tensor of transformers' cache layer L that an exporter returns: cache.layers.0._sliding_window_tensor.
CACHE_ATTRIBUTE = re.compile(r"cache\.layers\.(\d+)\.(\w+)$")


def cache_slot(name: str) -> str | None:
    """'key.L' / 'value.L' for a cache tensor of layer L (any exporter's naming), else None."""
    match = CACHE.search(name.lower())
    return f"{match.group(3)}.{int(match.group(2))}" if match and "encoder" not in name.lower() else None


def output_slot(name: str) -> str | None:
    """The oracle's name for a model output: 'logits', a cache slot, or 'cache.L.NAME' for another tensor of
    transformers' cache layer L; None when the oracle has no such output."""
    if name.endswith("logits"):
        return "logits"
    slot = cache_slot(name)
    if slot is not None:
        return slot
    match = CACHE_ATTRIBUTE.search(name)
    return f"cache.{int(match.group(1))}.{match.group(2)}" if match else None


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


@dataclass
class Expected:
    """What an oracle gives for one case: whole outputs by slot (caches; the logits too when ``rows`` is
    None), the logits as rows of the flattened [batch · seq] made on request, and the layers whose cache
    keeps only a sliding window of rows."""

    arrays: dict[str, np.ndarray]
    rows: Callable[[int, int], np.ndarray] | None = None  # float64 logits rows start … stop − 1, [k, vocab]
    logits_shape: tuple[int, ...] | None = None
    sliding: frozenset[int] = frozenset()

    def logits_rows(self, start: int, stop: int, slot: str = "logits") -> np.ndarray:
        """Rows start … stop − 1 of an output (every axis but the last flattened), in float64."""
        if slot == "logits" and self.rows is not None:
            return self.rows(start, stop)
        array = self.arrays[slot]
        return array.reshape(-1, array.shape[-1])[start:stop].astype(np.float64, copy=False)

    def shape(self, slot: str) -> tuple[int, ...] | None:
        if slot == "logits" and self.rows is not None:
            return self.logits_shape
        return self.arrays[slot].shape if slot in self.arrays else None

    def slots(self) -> set[str]:
        return set(self.arrays) | ({"logits"} if self.logits_shape is not None else set())


def expected_of(outputs: Mapping[str, np.ndarray]) -> Expected:
    """A plain runner's outputs (a caller's float64 oracle): whole, logits included."""
    logits = outputs.get("logits")
    return Expected(dict(outputs), None, logits.shape if logits is not None else None)


class HfOracle:
    """The transformers model of ``directory`` in float64 (or, as the floor, float32 with float64 cos/sin),
    as a runner: feeds in, outputs by slot name ('logits', 'key.L', 'value.L')."""

    name = NAME

    def __init__(self, directory: str | Path, dtype: str = "float64"):
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
            self.model = AutoModelForCausalLM.from_pretrained(str(self.directory), dtype=getattr(torch, dtype)).eval()
        except (OSError, ValueError, KeyError, RuntimeError) as e:  # transformers' refusals, often several lines
            raise PosexportError(f"--against-hf {self.directory}: transformers cannot load it ({one_line(e, 300)})") from None
        rotary = [m for m in self.model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
        if not rotary:
            raise PosexportError(f"--against-hf {self.directory}: the model has no rotary embedding module posexport can make exact")
        for module in rotary:
            exact = exact_table_forward if hasattr(module, "embed_positions") else exact_forward
            module.forward = exact(module, ropes)
        self.dtype = dtype
        self.label = (f"transformers {self.directory.name} ({dtype})" if dtype == "float64"
                      else f"transformers {self.directory.name} ({dtype}, cos/sin from float64 angles)")
        parameters = inspect.signature(self.model.forward).parameters
        # Logits by rows need the model's head apart from its body (a CausalLM around a base model).
        self.by_rows = "logits_to_keep" in parameters and self.model.base_model is not self.model
        self.cache_name = "cache" if "cache" in parameters else "past_key_values"  # renamed in transformers 5.25

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
        kind = getattr(torch, self.dtype)
        pairs = [tuple(torch.from_numpy(slots[f"{k}.{n}"].astype(np.float64)).to(kind) for k in ("key", "value")) for n in layers]
        return DynamicCache(ddp_cache_data=pairs, config=self.model.config)

    def call(self, ids: Any, cache: Any, position_ids: Any = None, keep: int = 1) -> tuple[Any, Any]:
        """The model on ``ids`` after ``cache``: (its output, the body's last hidden states). With
        ``by_rows``, only the last ``keep`` positions' logits are formed."""
        import torch

        past = cache.get_seq_length() if cache is not None else 0
        kwargs: dict[str, Any] = {"attention_mask": torch.ones((ids.shape[0], past + ids.shape[1]), dtype=torch.int64)}
        kwargs["position_ids"] = position_ids if position_ids is not None else torch.arange(past, past + ids.shape[1])[None].expand(ids.shape[0], -1)
        if self.by_rows:
            kwargs["logits_to_keep"] = keep
        captured: list[Any] = []
        hook = self.model.base_model.register_forward_hook(lambda module, args, output: captured.append(output))
        try:
            with torch.no_grad():
                out = self.model(input_ids=ids, use_cache=True, **{self.cache_name: cache}, **kwargs)
        finally:
            hook.remove()
        return out, captured[-1]

    def cache_of(self, out: Any) -> Any:
        return getattr(out, self.cache_name)

    def head(self, hidden: Any, body: Any) -> np.ndarray:
        """Logits [k, vocab] of hidden states [k, hidden] by the model's own forward after its body (its
        base model answering with these hidden states): whatever it does after the lm_head is its own."""
        import torch

        base = self.model.base_model
        answer = type(body)(last_hidden_state=hidden[None])
        base.forward = lambda *args, **kwargs: answer
        try:
            with torch.no_grad():
                out = self.model(input_ids=torch.zeros((1, hidden.shape[0]), dtype=torch.int64), use_cache=False, logits_to_keep=0)
        finally:
            del base.forward
        return out.logits[0].double().numpy()

    def expect(self, feeds: Mapping[str, np.ndarray]) -> Expected:
        """The oracle's outputs for one case: caches whole, logits as rows made from the hidden states."""
        import torch

        ids = torch.from_numpy(feeds["input_ids"])
        positions = torch.from_numpy(feeds["position_ids"]) if "position_ids" in feeds else None
        out, body = self.call(ids, self.past(feeds), positions)
        arrays: dict[str, np.ndarray] = {}
        sliding = set()
        for n, layer in enumerate(self.cache_of(out).layers):
            arrays[f"key.{n}"], arrays[f"value.{n}"] = layer.keys.numpy(), layer.values.numpy()
            arrays |= {f"cache.{n}.{k}": v.numpy() for k, v in vars(layer).items() if torch.is_tensor(v) and k not in ("keys", "values")}
            if getattr(layer, "is_sliding", False):
                sliding.add(n)
        if not (self.by_rows and hasattr(body, "last_hidden_state")):
            whole = out if not self.by_rows else self.call(ids, self.past(feeds), positions, keep=0)[0]
            arrays["logits"] = whole.logits.double().numpy()
            return Expected(arrays, sliding=frozenset(sliding))
        hidden = body.last_hidden_state
        flat = hidden.reshape(-1, hidden.shape[-1])
        vocab = int(out.logits.shape[-1])
        return Expected(arrays, lambda start, stop: self.head(flat[start:stop], body), (*hidden.shape[:-1], vocab), frozenset(sliding))

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every output whole (the logits of every position formed at once)."""
        expected = self.expect(feeds)
        arrays = dict(expected.arrays)
        if expected.logits_shape is not None and "logits" not in arrays:
            rows = int(np.prod(expected.logits_shape[:-1]))
            arrays["logits"] = expected.logits_rows(0, rows).reshape(expected.logits_shape)
        return arrays

    def next_logits(self, ids: np.ndarray, cache: Any) -> tuple[np.ndarray, Any]:
        """Greedy decoding's step: the last position's logits (float64, [vocab]) of ``ids`` [1, n] after
        ``cache`` (None: a prompt), and the cache that follows."""
        import torch

        out, _ = self.call(torch.from_numpy(np.ascontiguousarray(ids)), cache)
        return out.logits[0, -1].double().numpy(), self.cache_of(out)
