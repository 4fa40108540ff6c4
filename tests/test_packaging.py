"""The package as pip installs it: every import declared, its license and type marker shipped.
(scripts/wheel-smoke.sh installs the built wheel into a fresh venv and runs it; CI calls it.)"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("posexport", "cli", "graphs")
OWN = {"posexport", "posexport_cli", "posexport_graphs"}


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def distribution_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def imports() -> dict[str, bool]:
    """Every third-party top-level module the package imports -> whether some module imports it at its
    top level (then it is needed to import the package at all)."""
    found: dict[str, bool] = {}
    for source in SOURCES:
        for path in (ROOT / source).rglob("*.py"):
            tree = ast.parse(path.read_text())
            top = {id(node) for node in tree.body}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                else:
                    continue
                for name in (n.partition(".")[0] for n in names):
                    if name and name not in OWN and name not in sys.stdlib_module_names and name != "__future__":
                        found[name] = found.get(name, False) or id(node) in top
    return found


def undeclared(found: dict[str, bool], required: set[str], optional: set[str]) -> list[str]:
    """Imports whose distribution pyproject does not list (a top-level import must be a dependency)."""
    providers = importlib.metadata.packages_distributions()
    missing = []
    for module, at_top in sorted(found.items()):
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [module])}
        if not dists & (required if at_top else required | optional):
            missing.append(f"{module} ({', '.join(sorted(dists))}{', imported at top level' if at_top else ''})")
    return missing


def test_every_import_is_declared():
    meta = project()
    required = distribution_names(meta["dependencies"])
    optional = {d for extra, reqs in meta["optional-dependencies"].items() if extra != "test" for d in distribution_names(reqs)}
    found = imports()
    assert {"click", "typer", "numpy", "onnx"} <= set(found)
    assert undeclared(found, required, optional) == []
    # The check can fail: without click (as pyproject was before it was declared) the CLI's import is caught.
    assert any(m.startswith("click (click, imported at top level") for m in undeclared(found, required - {"click"}, optional))


def test_every_subpackage_is_shipped():
    """pyproject lists the packages by name: a new subpackage missing there is missing from the wheel."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, data = set(setuptools["packages"]), set(setuptools["package-data"])  # data folders are packages of their own
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "posexport").rglob("*.py")}  # namespace ones too
    assert found <= listed and {p for p in listed if p.startswith("posexport.")} <= found | data | {"posexport"}


def test_license_and_type_marker_are_shipped():
    meta = project()
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()
    assert (ROOT / "posexport" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["posexport"]
