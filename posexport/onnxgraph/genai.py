"""An onnxruntime-genai folder as doctor, patch and model-parity read it: genai_config.json, read through
posexport.guarded and checked field by field (a value of the wrong shape is one error line naming it),
and the files a patched copy of the folder needs (the ones the config names, and the tokenizer's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import files, guarded
from ..errors import PosexportError

GENAI_CONFIG = "genai_config.json"
# What onnxruntime-genai and transformers' tokenizers read beside the model.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "tokenizer.model", "vocab.json", "vocab.txt", "merges.txt", "chat_template.jinja",
                   "processor_config.json", "preprocessor_config.json", "generation_config.json")
# Fields read from the config: (section path, key) -> what they must be.
POSITIVE_INTS = ((("model",), "context_length"), (("model", "decoder"), "head_size"), (("search",), "max_length"))


def is_genai(folder: Path) -> bool:
    return (folder / GENAI_CONFIG).exists() or (folder / GENAI_CONFIG).is_symlink()


def shown(value: Any) -> str:
    return json.dumps(value)[:60] if not isinstance(value, float) or value == value else "NaN"


def section(config: dict[str, Any], keys: tuple[str, ...], path: Path) -> dict[str, Any]:
    """config[keys[0]][keys[1]]…, an object ({} when absent); anything else is refused naming it."""
    current = config
    for depth, key in enumerate(keys):
        current = current.get(key, {})
        if not isinstance(current, dict):
            raise PosexportError(f"{path}: {'.'.join(keys[:depth + 1])} = {shown(current)}: expected an object")
    return current


def read_config(folder: Path) -> dict[str, Any] | None:
    """The folder's genai_config.json, checked; None when the folder has none."""
    if not is_genai(folder):
        return None
    path = folder / GENAI_CONFIG
    config = guarded.read_json(GENAI_CONFIG, root=folder)
    if not isinstance(config, dict):
        raise PosexportError(f"{path}: expected a JSON object, found {type(config).__name__}")
    for keys, key in POSITIVE_INTS:
        value = section(config, keys, path).get(key)
        if value is not None and (type(value) is not int or value <= 0):
            raise PosexportError(f"{path}: {'.'.join((*keys, key))} = {shown(value)}: expected a positive integer")
    for name in named_files(config, path):
        if not guarded_name(name):
            raise PosexportError(f"{path}: file name {shown(name)}: expected a plain file name in the folder")
    for name in [*named_files(config, path), *TOKENIZER_FILES]:
        files.note_input(folder / name)  # the folder's files are the input's too: nothing is written over them
    return config


def guarded_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name and name.isprintable()


def named_files(config: dict[str, Any], path: Path) -> list[str]:
    """The file names the config's model sections name (decoder, embedding, vision, speech …)."""
    names = []
    for key, value in section(config, ("model",), path).items():
        if isinstance(value, dict) and "filename" in value:
            if not isinstance(value["filename"], str):
                raise PosexportError(f"{path}: model.{key}.filename = {shown(value['filename'])}: expected a file name")
            names.append(value["filename"])
    return names


def context_length(folder: Path) -> int | None:
    config = read_config(folder)
    return None if config is None else section(config, ("model",), folder / GENAI_CONFIG).get("context_length")


def head_size(folder: Path) -> int | None:
    config = read_config(folder)
    return None if config is None else section(config, ("model", "decoder"), folder / GENAI_CONFIG).get("head_size")


def companions(folder: Path, config: dict[str, Any], model_name: str) -> list[str]:
    """Names of the folder's files a copy of it needs besides the model: those the config names and the
    tokenizer's, when present."""
    wanted = [n for n in named_files(config, folder / GENAI_CONFIG) if n != model_name] + list(TOKENIZER_FILES)
    return sorted({n for n in wanted if (folder / n).exists() or (folder / n).is_symlink()})
