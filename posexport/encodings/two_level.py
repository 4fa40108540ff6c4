"""The two-level cos/sin lookup (docs/numerics.md), as a torch module and as an onnxscript function, shared by
every encoding that reads angle tables (rope and its longrope regimes, sinusoidal, sincos-2d, rope-2d).

    p = q·P + r:   cos(pω) = cos(qPω)·cos(rω) − sin(qPω)·sin(rω)
                   sin(pω) = sin(qPω)·cos(rω) + cos(qPω)·sin(rω)

Positions outside [0, limit) are sent past every regime's coarse rows, so the lookup raises instead of
wrapping around (ONNX Gather accepts negative indices) or reading another regime's rows.
"""

from __future__ import annotations

from typing import Any

import torch
from onnxscript import script

from .. import tables
from ..dtypes import COMPUTE
from ..script import POSEXPORT
from .guards import OUT_OF_RANGE, name_nodes


class TwoLevelCosSin(torch.nn.Module):
    """Holds the four tables as buffers; forward(position_ids [, regime]) -> cos, sin [..., n]."""

    def __init__(self, t: tables.TwoLevelTables):
        super().__init__()
        for name, value in t.as_dict(COMPUTE.numpy).items():
            self.register_buffer(name, torch.from_numpy(value), persistent=False)
        self.fine_rows, self.coarse_rows, self.limit, self.regimes = t.fine_rows, t.coarse_rows, t.limit, t.regimes

    def forward(self, position_ids: torch.Tensor, regime: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        outside = (position_ids < 0) | (position_ids >= self.limit)
        safe = torch.where(outside, self.regimes * self.limit, position_ids)
        coarse, fine = safe // self.fine_rows, safe % self.fine_rows
        if regime is not None:  # regime r reads rows [r·P, (r+1)·P) and [r·Q, (r+1)·Q)
            coarse, fine = coarse + regime * self.coarse_rows, fine + regime * self.fine_rows
        embed = torch.nn.functional.embedding
        cf, sf = embed(fine, self.fine_cos), embed(fine, self.fine_sin)
        cc, sc = embed(coarse, self.coarse_cos), embed(coarse, self.coarse_sin)
        return cc * cf - sc * sf, sc * cf + cc * sf


def gather_function(op: Any) -> Any:
    """posexport.TwoLevelGather(fine, coarse, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin:
    the angle-addition formula over rows ``fine`` and ``coarse`` of the tables."""

    @script(POSEXPORT, default_opset=op)
    def TwoLevelGather(fine, coarse, fine_cos, fine_sin, coarse_cos, coarse_sin):
        cf = op.Gather(fine_cos, fine)
        sf = op.Gather(fine_sin, fine)
        cc = op.Gather(coarse_cos, coarse)
        sc = op.Gather(coarse_sin, coarse)
        cos = op.Sub(op.Mul(cc, cf), op.Mul(sc, sf))
        sin = op.Add(op.Mul(sc, cf), op.Mul(cc, sf))
        return cos, sin

    # The fine rows are read modulo P; only the coarse lookups can be out of range.
    return name_nodes(TwoLevelGather, "Gather", OUT_OF_RANGE, skip=2)


def cos_sin_function(t: tables.TwoLevelTables, op: Any) -> Any:
    """posexport.TwoLevelCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin) -> cos, sin."""
    fine_rows, limit, past_every_regime = t.fine_rows, t.limit, t.regimes * t.limit
    gather = gather_function(op)

    @script(POSEXPORT, default_opset=op)
    def TwoLevelCosSin(position_ids, fine_cos, fine_sin, coarse_cos, coarse_sin):
        outside = op.Or(op.Less(position_ids, op.Constant(value_int=0)), op.GreaterOrEqual(position_ids, op.Constant(value_int=limit)))
        safe = op.Where(outside, op.Constant(value_int=past_every_regime), position_ids)
        coarse = op.Div(safe, op.Constant(value_int=fine_rows))
        fine = op.Mod(safe, op.Constant(value_int=fine_rows))
        cos, sin = gather(fine, coarse, fine_cos, fine_sin, coarse_cos, coarse_sin)
        return cos, sin

    return TwoLevelCosSin
