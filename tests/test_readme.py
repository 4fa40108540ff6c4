"""The Python examples of the docs that are complete programs run as written (README.md has none: its tour is commands)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Pages whose python blocks are whole programs (docs/surgery.md's sketch names files the reader has).
PAGES = [ROOT / "docs" / "api.md", ROOT / "docs" / "attention-bias.md"]
BLOCKS = [(page.relative_to(ROOT), i, block) for page in PAGES
          for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))]


def test_every_page_has_python_examples():
    assert {page for page, _, _ in BLOCKS} == {page.relative_to(ROOT) for page in PAGES}


@pytest.mark.parametrize("page, index, block", BLOCKS, ids=[f"{p}-{i}" for p, i, _ in BLOCKS])
def test_example_runs(page, index, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"{page} python block {index}", "exec"), {"__name__": "example"})
