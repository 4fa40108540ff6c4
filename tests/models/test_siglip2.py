"""SigLIP-2's tower: a table that is not square refused."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from posexport.errors import PosexportError  # noqa: E402
from posexport.models import read_model  # noqa: E402

import zoo  # noqa: E402


def test_siglip2_tower_with_a_table_not_square_is_refused_in_one_line(tmp_path):
    folder = zoo.tiny("siglip2_vision_model", tmp_path / "siglip2", num_patches=200)
    with pytest.raises(PosexportError, match="'num_patches' = 200: its table is reshaped to a square grid") as caught:
        read_model(folder)
    assert "\n" not in str(caught.value)
