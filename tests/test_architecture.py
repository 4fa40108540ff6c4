"""The package's shape, per module and per package: no import circle between modules, none between the packages
(and modules) of any one package, no module importing a layer above its own, a light contract."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "posexport"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """The package's modules a file imports (top level, inside functions, and for type checking only),
    resolved to known modules."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != here:
                found.add(name)
    return found


# `python -m posexport`: the CLI's door, in the cli layer (test_main_is_only_the_clis_door).
MAIN = PACKAGE / "__main__.py"


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports (``package``: a package folder, posexport's by default)."""
    root = package.parent
    files = {module_name(p, root): p for p in package.rglob("*.py") if p != MAIN}
    known = set(files)
    # A package's __init__ is part of every import of its modules; a plain docstring one adds no edge.
    return {name: imported_modules(path, known, root) - {name} for name, path in files.items()}


def package_graphs(graph: dict[str, set[str]]) -> dict[str, dict[str, set[str]]]:
    """Per package, the import graph of its members (its modules and subpackages, each with everything below it):
    member -> the members it imports. A package's own __init__ is its face, not a member."""
    packages = {m.rpartition(".")[0] for m in graph if "." in m} | {m for m in graph if any(o.startswith(m + ".") for o in graph)}
    out: dict[str, dict[str, set[str]]] = {}
    for package in sorted(packages):
        def member(module: str) -> str | None:
            rest = module.removeprefix(package + ".")
            return f"{package}.{rest.split('.')[0]}" if module.startswith(package + ".") else None
        edges: dict[str, set[str]] = {}
        for module, imports in graph.items():
            source = member(module)
            if source is not None:
                edges.setdefault(source, set()).update(t for i in imports if (t := member(i)) not in (None, source))
        out[package] = edges
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_no_package_circle():
    """Within every package, its modules and subpackages import each other one way only (verdicts and models
    may not import each other even where no two modules of theirs form a circle)."""
    assert {p: c for p, members in package_graphs(import_graph()).items() if (c := cycles(members))} == {}


def test_a_circle_between_packages_fails_the_package_rule(tmp_path):
    """Two subpackages importing each other through different modules: no module circle, one package circle."""
    files = {"__init__.py": "", "a/__init__.py": "", "a/x.py": "from ..b import y\n", "a/w.py": "",
             "b/__init__.py": "", "b/y.py": "", "b/z.py": "from ..a import w\n"}
    for name, text in files.items():
        (tmp_path / "demo" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "demo" / name).write_text(text)
    graph = import_graph(tmp_path / "demo")
    assert graph["demo.a.x"] == {"demo.b", "demo.b.y"} and graph["demo.b.z"] == {"demo.a", "demo.a.w"}
    assert cycles(graph) == []
    assert {p: cycles(members) for p, members in package_graphs(graph).items()} == {
        "demo": [["demo.a", "demo.b"]], "demo.a": [], "demo.b": []}


# The layer order of docs/architecture.md, bottom first: a module imports only from its own layer or below.
LAYERS = [
    ["contract", "dtypes", "errors"],
    ["params", "files", "limits", "guarded", "comparison", "progress", "upstream"],
    ["tables", "script", "checkpoint", "weights", "onnxgraph"],
    ["encodings", "rope", "registry"],
    ["export", "extend", "indexshare"],
    ["runtimes"],
    ["models"],
    ["verdicts", "surgery"],
    ["bench"],
    ["options", "reports", "api"],
]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}


def layer_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def test_layers():
    graph = import_graph()
    placed = {layer_of(m) for m in graph} - {""}
    assert placed <= set(LEVEL), f"modules in no layer of docs/architecture.md: {placed - set(LEVEL)}"
    upward = [f"{m} -> {i}" for m, imports in graph.items() for i in imports
              if layer_of(m) and layer_of(i) and LEVEL[layer_of(i)] > LEVEL[layer_of(m)]]
    assert upward == []
    for module, imports in graph.items():
        assert not any(i.startswith("posexport_cli") for i in imports), module
        if module.startswith("posexport.runtimes"):
            assert "posexport.export" not in imports, f"{module} imports the builder"
    # The contract sits below everything but the light dtypes module its annotations name.
    assert graph["posexport.contract"] <= {"posexport.dtypes"}


def test_the_documented_layer_order_is_the_tested_one():
    text = (ROOT / "docs" / "architecture.md").read_text()
    documented = text.split("    contract", 1)[1].split("\n\n", 1)[0]
    rows = [[name.strip() for name in row.split(",")] for row in ("contract" + documented).replace("\n", " ").split("<")]
    assert [sorted(r) for r in rows] == [sorted(r) for r in LAYERS] + [["cli"]]


def test_main_is_only_the_clis_door():
    """posexport/__main__.py imports the CLI's entry and nothing else."""
    tree = ast.parse(MAIN.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert imported == {"posexport_cli.main"}


def test_contract_registry_and_cli_start_light():
    """Importing the contract, the registry and the CLI pulls in neither torch nor onnxscript."""
    code = (
        "import sys, posexport.contract, posexport.registry, posexport_cli.main\n"
        "heavy = [m for m in ('torch', 'onnxscript', 'onnx', 'onnxruntime') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_no_site_kind_imports_another():
    """Surgery's site kinds (find.KINDS) share matching through helper modules (pattern.py, per_call.py, caches.py),
    never by importing each other; a kind that needs others' sites (the per-token caches, the unrecognised pairs) is
    handed them by find.py."""
    from posexport.surgery.find import KINDS

    graph = import_graph()
    kinds = {type(k).__module__ for k in KINDS.values()}
    assert len(kinds) == 14
    assert {m: sorted(graph[m] & kinds) for m in kinds if graph[m] & kinds} == {}
