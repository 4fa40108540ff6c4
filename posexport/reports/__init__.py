"""Rendering: parity reports (parity.py) and bench results (bench.py) as terminal, JSON, JUnit, Markdown."""
