"""Model surgery: find the positional-encoding sites of any exported model, diagnose their faults with
numbers, patch them with posexport's exact maths, and splice posexport encodings into your own graph
(whole-model parity, patched against original or transformers in float64, is posexport.verdicts').

    from posexport import surgery
    sites = surgery.find("model.onnx")
    fixed = surgery.patch(onnx.load("model.onnx"), values={"base": 500000.0}, position_limit=8192).model
    mine = surgery.splice(my_model, at={"q": "q", "k": "k"}, position_ids="position_ids", head_dim=64, heads=8)
"""

from __future__ import annotations

from .doctor import diagnose, doctor
from .find import KINDS, find
from .learned_table import Extension
from .patch import Patched, patch, patch_file
from .source import requested_values
from .splice import splice

__all__ = ["KINDS", "Extension", "Patched", "diagnose", "doctor", "find", "patch", "patch_file", "requested_values", "splice"]
