"""What every family's sessions share on their way into transformers' code (each named piece of which they reach
through posexport.upstream.transformers_attr, the one door): the folder's config (a composite's part, a wrapper's
text_config, a tower's vision_config), a trained tensor of the checkpoint, and the tensor conversions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import checkpoint
from .recipes import Recipe


def auto_config(folder: Path, recipe: Recipe) -> Any:
    """The folder's config as transformers reads it, or the part of it the recipe names."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(folder, local_files_only=True)
    for name in recipe.part.split(".") if recipe.part else ():  # a composite's part: its own config
        cfg = getattr(cfg, name)
    if recipe.vision_config:
        return cfg.vision_config
    return cfg.get_text_config() if recipe.text_config else cfg


def torch_float(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))


def trained(folder: Path, key: str) -> Any:
    """The checkpoint's tensor ``key`` (a role's trained table), as a float32 torch tensor."""
    return torch_float(checkpoint.read_tensor(*checkpoint.locate(folder, (key,))))


def to_bshd(x: np.ndarray, p: Any) -> Any:
    """x of a rope graph's layout as a tensor [batch, seq, heads, dim]."""
    x = torch_float(x)
    return x if p.layout == "bshd" else x.transpose(1, 2) if p.layout == "bhsd" else x.unflatten(-1, (p.heads, p.head_dim))


def from_bshd(out: Any, p: Any) -> np.ndarray:
    return (out if p.layout == "bshd" else out.transpose(1, 2) if p.layout == "bhsd" else out.flatten(-2)).numpy()


def softmax_input(attention: Any, heads: int, window: int) -> Any:
    """What reaches a window self-attention's softmax (head size 1) with its query projection zeroed, run
    forward on random hidden states: q·kᵀ (Swin-V2: cos(q, k), F.normalize making a zero q zero) is then 0,
    so this is the bias alone (captured there)."""
    import torch
    from torch.overrides import TorchFunctionMode

    attention.query.weight.data.zero_()
    if attention.query.bias is not None:
        attention.query.bias.data.zero_()
    seen = []

    class SoftmaxInput(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax):
                seen.append(args[0].detach().clone())
            return func(*args, **(kwargs or {}))

    hidden = torch.from_numpy(np.random.default_rng(0).standard_normal((1, window * window, heads)).astype(np.float32))
    with torch.no_grad(), SoftmaxInput():
        attention(hidden)
    return seen[0]
