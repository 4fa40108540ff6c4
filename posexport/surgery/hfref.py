"""A transformers model as the float64 oracle of whole-model parity: weights and every layer in float64,
and its rotary module's cos/sin formed from float64 angles (transformers forms them in float32). The
frequencies come from posexport's scalings and are checked, on every call, against the model's own
rope functions, so a misread config fails loudly instead of agreeing with itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import checkpoint, params as params_mod
from ..errors import PosexportError, one_line
from ..rope.encoding import RopeParams, inv_freq_and_factor
from .modelparity import Runner
from .source import model_values

AGREEMENT = 1e-5  # relative, against transformers' float32 frequencies


def exact_forward(module: Any, p: RopeParams) -> Any:
    """A forward for a transformers rotary module: cos/sin [b, s, rotary_dim] in float64."""
    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    def forward(x: Any, position_ids: Any, layer_type: Any = None) -> tuple[Any, Any]:
        seq_len = int(position_ids.max()) + 1
        inv_freq, factor = inv_freq_and_factor(p, seq_len)
        if module.rope_type in ("dynamic", "longrope"):
            theirs, their_factor = ROPE_INIT_FUNCTIONS[module.rope_type](module.config, None, seq_len=seq_len)
        else:
            theirs, their_factor = module.original_inv_freq, module.attention_scaling
        theirs = theirs.double().numpy()
        if np.max(np.abs(theirs / inv_freq - 1)) > AGREEMENT or abs(their_factor - factor) > AGREEMENT * factor:
            raise PosexportError(f"posexport reads this config's rope differently from transformers (frequencies {inv_freq[:3]} vs {theirs[:3]})")
        angles = position_ids[..., None].double() * torch.from_numpy(inv_freq)
        emb = torch.cat((angles, angles), dim=-1)
        return (emb.cos() * factor).to(x.dtype), (emb.sin() * factor).to(x.dtype)

    return forward


def hf_reference(directory: str | Path) -> Runner:
    """A runner over feeds (input_ids, attention_mask, position_ids; no past) returning {"logits": …}."""
    import torch
    from transformers import AutoModelForCausalLM

    directory = Path(directory)
    ropes = model_values(directory)
    if len(ropes) != 1:
        raise PosexportError(f"--against-hf {directory}: the float64 oracle takes a model with one rope; this one has {len(ropes)}")
    checkpoint.weight_files(directory)  # contained, regular, in budget, before transformers opens any
    try:
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float64).eval()
    except (OSError, ValueError, KeyError, RuntimeError) as e:  # transformers' refusals, often several lines
        raise PosexportError(f"--against-hf {directory}: transformers cannot load it ({one_line(e, 300)})") from None
    rotary = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    if not rotary:
        raise PosexportError(f"--against-hf {directory}: the model has no rotary embedding module posexport can make exact")
    p = params_mod.build(RopeParams, ropes[0])
    for module in rotary:
        module.forward = exact_forward(module, p)

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if any("past" in name and value.size for name, value in feeds.items()):
            raise PosexportError("the transformers reference runs without past key/values")
        ids = torch.from_numpy(feeds["input_ids"])
        kwargs = {"attention_mask": torch.ones_like(ids)}
        if "position_ids" in feeds:
            kwargs["position_ids"] = torch.from_numpy(feeds["position_ids"])
        with torch.no_grad():
            return {"logits": model(input_ids=ids, use_cache=False, **kwargs).logits.numpy()}

    run.label = f"transformers {directory.name} (float64)"  # type: ignore[attr-defined]
    return run
