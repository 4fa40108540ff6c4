"""The part of JSON Schema (2020-12) that docs/schemas/ uses, as a validator of its own: type, properties, required,
additionalProperties, items, enum, const, pattern, minimum, anyOf and oneOf. A keyword it does not know is an error,
so a schema cannot silently ask for more than is checked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
ANNOTATIONS = {"$schema", "title", "description"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.json").read_text())


def is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def errors(value: Any, rules: dict[str, Any], where: str = "$") -> list[str]:
    """Every way ``value`` breaks ``rules``, each naming where."""
    found = []
    for key, rule in rules.items():
        if key in ANNOTATIONS:
            continue
        check = CHECKS.get(key)
        if check is None:
            raise ValueError(f"{where}: schema keyword {key!r} is not one this validator checks")
        found += check(value, rule, rules, where)
    return found


def check_type(value: Any, rule: Any, rules: dict, where: str) -> list[str]:
    kinds = [rule] if isinstance(rule, str) else rule
    return [] if any(is_type(value, k) for k in kinds) else [f"{where}: {type(value).__name__} is not {' or '.join(kinds)}"]


def check_required(value: Any, rule: list[str], rules: dict, where: str) -> list[str]:
    return [f"{where}: missing {key!r}" for key in rule if key not in value] if isinstance(value, dict) else []


def check_properties(value: Any, rule: dict[str, dict], rules: dict, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    return [e for key, sub in rule.items() if key in value for e in errors(value[key], sub, f"{where}.{key}")]


def check_additional(value: Any, rule: Any, rules: dict, where: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    known = rules.get("properties", {})
    extra = {k: v for k, v in value.items() if k not in known}
    if rule is False:
        return [f"{where}: unexpected {k!r}" for k in extra]
    return [e for k, v in extra.items() for e in errors(v, rule, f"{where}.{k}")] if isinstance(rule, dict) else []


def check_items(value: Any, rule: dict, rules: dict, where: str) -> list[str]:
    return [e for i, item in enumerate(value) for e in errors(item, rule, f"{where}[{i}]")] if isinstance(value, list) else []


def check_any(value: Any, rule: list[dict], rules: dict, where: str) -> list[str]:
    results = [errors(value, option, where) for option in rule]
    return [] if any(not r for r in results) else [f"{where}: matches none of anyOf ({'; '.join(r[0] for r in results)})"]


def check_one(value: Any, rule: list[dict], rules: dict, where: str) -> list[str]:
    matched = sum(not errors(value, option, where) for option in rule)
    return [] if matched == 1 else [f"{where}: matches {matched} of oneOf's {len(rule)} options, not exactly one"]


CHECKS = {
    "type": check_type,
    "required": check_required,
    "properties": check_properties,
    "additionalProperties": check_additional,
    "items": check_items,
    "anyOf": check_any,
    "oneOf": check_one,
    "enum": lambda v, rule, rules, w: [] if v in rule else [f"{w}: {v!r} is not one of {rule}"],
    "const": lambda v, rule, rules, w: [] if v == rule and type(v) is type(rule) else [f"{w}: {v!r} is not {rule!r}"],
    "pattern": lambda v, rule, rules, w: [] if not isinstance(v, str) or re.search(rule, v) else [f"{w}: {v!r} does not match {rule}"],
    "minimum": lambda v, rule, rules, w: [] if not is_type(v, "number") or v >= rule else [f"{w}: {v} < {rule}"],
}


def validate(document: Any, name: str) -> None:
    """Raise AssertionError listing every way ``document`` breaks docs/schemas/NAME.json."""
    found = errors(document, schema(name))
    assert not found, f"docs/schemas/{name}.json: " + "; ".join(found[:10])
