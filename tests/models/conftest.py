"""What the model tests of several families share: the tiny model of any registry type, written on first use."""

from __future__ import annotations

from pathlib import Path

import pytest

import zoo


class TinyModels(dict):
    """model_type -> the folder of its tiny model, written on first use."""

    def __init__(self, root: Path):
        super().__init__()
        self.root = root

    def __missing__(self, model_type: str) -> Path:
        self[model_type] = folder = zoo.tiny(model_type, self.root / model_type)
        return folder


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    return TinyModels(tmp_path_factory.mktemp("catalogue"))
