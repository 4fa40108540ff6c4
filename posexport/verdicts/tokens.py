"""The token ids whole-model parity feeds: real text tokenized by the model's own tokenizer (``--text``),
ids from a file (``--tokens``), or, when neither is given, a default text wherever a tokenizer is found
(the docstrings of Python's standard library, which ship with every Python), and seeded random ids only
where none is (or with ``--random-ids``). The report says which was used.

On random ids a trained model's own float32 forward is far noisier than on text (a 30-layer model: 1e-4
at a few positions against 2e-6), so text is what a verdict should see. A case's tokens are the first
``seq`` of the text (batch row b: the b-th run of ``seq``). The tokenizer is read from tokenizer.json
through posexport.guarded and parsed by the ``tokenizers`` package (a JSON description: nothing in it runs).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import guarded
from ..errors import PosexportError, one_line

TOKENIZER = "tokenizer.json"
# A tokenizer that knows fewer than half of a text's words (a placeholder word-level vocabulary) turns it
# into one repeated unknown token: no better than random ids, and far less varied.
UNKNOWN_SHARE = 0.5
# Modules whose docstrings make the default text: plain English prose on code, in every CPython build.
DEFAULT_MODULES = (
    "abc", "argparse", "ast", "base64", "bisect", "calendar", "collections", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "fnmatch", "fractions", "functools", "glob", "gzip", "hashlib", "heapq",
    "hmac", "inspect", "io", "ipaddress", "itertools", "json", "logging", "math", "operator", "os", "pathlib", "pickle",
    "pprint", "queue", "random", "re", "shlex", "shutil", "statistics", "string", "struct", "subprocess", "tarfile",
    "tempfile", "textwrap", "threading", "tokenize", "traceback", "typing", "unittest", "uuid", "warnings", "weakref",
    "zipfile",
)


@dataclass(frozen=True)
class Tokens:
    """The ids a run's cases are cut from (None: seeded random ids) and what the report says of them."""

    ids: np.ndarray | None
    description: str

    def prompt(self, batch: int, seq: int, vocab: int) -> np.ndarray:
        """[batch, seq] ids: row b is the b-th run of ``seq`` ids; refused when the ids run out or one is
        past the model's vocabulary."""
        ids = self.ids if self.ids is not None else np.zeros(0, dtype=np.int64)
        if len(ids) < batch * seq:
            raise PosexportError(f"{self.description} gives {len(ids)} tokens; a case of batch {batch} × {seq} tokens needs "
                                 f"{batch * seq}: give a longer --text or --tokens, or shorter --prompt lengths")
        rows = ids[: batch * seq].reshape(batch, seq)
        if vocab and int(rows.max()) >= vocab:
            raise PosexportError(f"{self.description} holds id {int(rows.max())}, past the model's vocabulary of {vocab}: "
                                 "is the tokenizer the model's own?")
        return rows


def python_text() -> str:
    """The default text: the docstrings of DEFAULT_MODULES and of their public classes and functions."""
    return _python_text(sys.version_info[:2])


@functools.lru_cache(maxsize=1)
def _python_text(version: tuple[int, int]) -> str:
    parts = []
    for name in DEFAULT_MODULES:
        module = importlib.import_module(name)
        parts += [doc for doc in [inspect.getdoc(module)] if doc]
        for attribute in sorted(vars(module)):
            value = getattr(module, attribute)
            if not attribute.startswith("_") and getattr(value, "__module__", None) == module.__name__:
                parts += [doc for doc in [inspect.getdoc(value)] if doc]
    return "\n\n".join(parts)


def default_label() -> str:
    return f"Python {sys.version_info[0]}.{sys.version_info[1]}'s standard-library docstrings"


def find_tokenizer(folders: Sequence[Path]) -> Path | None:
    """The first tokenizer.json of ``folders`` (the transformers model's, then the ONNX model's)."""
    return next((folder / TOKENIZER for folder in folders if (folder / TOKENIZER).exists() or (folder / TOKENIZER).is_symlink()), None)


def tokenizers_missing() -> str:
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return "the tokenizers package is not installed (pip install 'posexport[hf]')"
    return ""


@functools.lru_cache(maxsize=4)
def encoded(description: str, text: str) -> tuple[np.ndarray, float]:
    """The ids of ``text`` by the tokenizer ``description`` (its JSON), special tokens added as the
    tokenizer's own post-processor adds them, and the share of them that is its unknown token."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(description)
    except Exception as e:  # the tokenizers package's own parse errors
        raise PosexportError(f"not a tokenizer the tokenizers package reads ({one_line(e, 200)})") from None
    ids = np.asarray(tokenizer.encode(text).ids, dtype=np.int64)
    unknown = getattr(tokenizer.model, "unk_token", None)
    unknown_id = tokenizer.token_to_id(unknown) if unknown else None
    share = float(np.mean(ids == unknown_id)) if unknown_id is not None and ids.size else 0.0
    return ids, share


def tokenized(tokenizer: Path, text: str, what: str) -> tuple[np.ndarray, float]:
    root = tokenizer.parent
    raw = guarded.read_bytes(tokenizer.name, root=root)
    try:
        return encoded(raw.decode("utf-8"), text)
    except UnicodeDecodeError:
        raise PosexportError(f"{tokenizer}: not UTF-8 JSON; expected a tokenizers tokenizer.json") from None
    except PosexportError as e:
        raise PosexportError(f"{tokenizer}: {e} (tokenizing {what})") from None


def read_text(path: Path) -> str:
    data = guarded.read_bytes(guarded.regular_file(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PosexportError(f"--text {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_tokens(path: Path) -> np.ndarray:
    """Ids from a .npy (integers, one row) or a JSON list of integers."""
    data = guarded.read_bytes(guarded.regular_file(path))
    if path.suffix == ".npy":
        import io

        try:
            ids = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise PosexportError(f"--tokens {path}: not an .npy array ({one_line(e, 120)})") from None
        ok = np.issubdtype(ids.dtype, np.integer) and (ids.ndim == 1 or (ids.ndim == 2 and ids.shape[0] == 1))
    else:
        try:
            ids = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise PosexportError(f"--tokens {path}: not a JSON list of token ids ({one_line(e, 120)})") from None
        ok = isinstance(ids, list) and all(type(i) is int for i in ids)
        ids = np.asarray(ids if ok else [], dtype=np.int64)
    if not ok or ids.size == 0 or int(ids.min()) < 0:
        raise PosexportError(f"--tokens {path}: expected a non-empty list of non-negative integer ids (.npy of one row, or JSON)")
    return ids.reshape(-1).astype(np.int64)


def token_source(text: str | Path | None = None, tokens: str | Path | None = None, random_ids: bool = False,
                 folders: Sequence[str | Path] = ()) -> Tokens:
    """What a run's cases are cut from: ``tokens``, ``text`` tokenized by the first tokenizer.json of
    ``folders``, random ids (asked for, or where no tokenizer is found), or else the default text."""
    given = [name for name, value in (("--text", text), ("--tokens", tokens), ("--random-ids", random_ids)) if value]
    if len(given) > 1:
        raise PosexportError(f"{' and '.join(given)}: give one source of token ids")
    if tokens is not None:
        ids = read_tokens(Path(tokens))
        return Tokens(ids, f"tokens {Path(tokens).name} ({len(ids)} ids)")
    found = find_tokenizer([Path(f) for f in folders])
    if random_ids:
        return Tokens(None, "random token ids (--random-ids)")
    missing = tokenizers_missing() if found is not None else ""
    if text is not None:
        if found is None or missing:
            where = ", ".join(str(f) for f in folders) or "no model folder"
            raise PosexportError(f"--text {text}: no tokenizer to read it with ({missing or f'no {TOKENIZER} in {where}'}); "
                                 "give --tokens FILE instead")
        ids, unknown = tokenized(found, read_text(Path(text)), str(text))
        if unknown > UNKNOWN_SHARE:
            raise PosexportError(f"--text {text}: {unknown:.0%} of its tokens are {found}'s unknown token: is that the model's tokenizer?")
        return Tokens(ids, f"text {Path(text).name} ({len(ids)} tokens by {found})")
    if found is None or missing:
        why = missing or f"no {TOKENIZER} found"
        return Tokens(None, f"random token ids ({why}; give --text FILE for real text)")
    ids, unknown = tokenized(found, python_text(), default_label())
    if unknown > UNKNOWN_SHARE:
        return Tokens(None, f"random token ids ({found} knows too few words of the default text: {unknown:.0%} unknown; give --text FILE)")
    return Tokens(ids, f"{default_label()} ({len(ids)} tokens by {found}; give --text FILE for your own)")
