"""The compatibility matrix (`make matrix`): every rope architecture of posexport's catalogue built tiny
and random, exported by every exporter that takes it, then doctor → patch → model-parity against float64
transformers, inside the trained length and past it; the page is docs/compatibility.md.

It is tooling, not part of the installed library: it drives third-party exporters (some in their own
virtual environments, .venvs/NAME) and calls posexport only through its public functions.

    python -m matrix --json docs/compatibility.json --markdown docs/compatibility.md
"""
