"""Presets (graphs/presets/*.json, well-known model configs) and the default output folder of builds."""
