"""Encoding kinds: one small base per contract family (docs/contract.md), each an Encoding that
supplies the inputs, feeds, parity sweep, example axes, the cast-once entry function and the property
adapters of its family, so an encoding file holds only what is its own.

    rotation.Rotation        q/k rotated by position                       rope
    rows.AdditiveRows        x [batch, seq, d] + PE[position_ids]          sinusoidal, learned
    bias.AttentionBias       scores [batch, heads, q_len, k_len] + bias    alibi, t5
    grid.GridEncoding        x [batch, grid_h, grid_w, ...]                vit-learned, sincos-2d, rope-2d
"""
