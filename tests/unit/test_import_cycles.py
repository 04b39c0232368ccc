"""No import cycles between zeroforge's modules: each module can be read, tested and
moved knowing only what it imports, never what imports it.

Every import of a file counts, at any depth (a function-level import too: it only moves
the cycle to run time). ``from zeroforge.x import y`` is an edge to ``zeroforge.x.y``
when that is a module, else to ``zeroforge.x``; importing a module is not counted as
importing its parent packages."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {folder: package for package, folder in tomllib.loads(
    (ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    .items()}
"""Folder at the top of the repository -> the package it installs as (pyproject's
``package-dir``, read backwards)."""


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package's folders
    (``shared/games/go.py`` -> ``zeroforge.shared.games.go``, an ``__init__.py`` -> its
    package)."""
    found = {}
    for folder, package in FOLDERS.items():
        if not (root / folder).is_dir():
            continue
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (the file ``path``) imports."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")
                parent = parent[:len(parent) - node.level + is_package]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return (out & known) - {module}


def import_graph(root: Path) -> dict[str, set[str]]:
    files = module_files(root)
    known = set(files)
    return {module: imports_of(module, path, known) for module, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted, in order of their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def describe(found: list[list[str]]) -> str:
    return "import cycles (modules that import each other):\n" + "\n".join(
        "  " + ", ".join(c) for c in found)


def test_the_package_has_no_import_cycles():
    found = cycles(import_graph(ROOT))
    assert not found, describe(found)


def test_the_graph_covers_every_folder():
    """Every folder's modules are in the graph, with their imports of each other."""
    graph = import_graph(ROOT)
    for package in FOLDERS.values():
        assert any(m == package or m.startswith(package + ".") for m in graph), package
    assert "zeroforge.shared.transport.base" in graph["zeroforge.shared.transport.memory"]


def test_the_checker_finds_a_planted_cycle(tmp_path, monkeypatch):
    """The check above can fail: two modules importing each other (one inside a function,
    one by ``from package import module``) are reported, a third importing them is not."""
    pkg = tmp_path / "shared" / "pkg"
    pkg.mkdir(parents=True)
    (tmp_path / "shared" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from zeroforge.shared.pkg.b import g\n")
    (pkg / "b.py").write_text("from zeroforge.shared.pkg import a\n\ng = a\n")
    (pkg / "c.py").write_text("import zeroforge.shared.pkg.a\nfrom . import b\n")
    graph = import_graph(tmp_path)
    assert graph["zeroforge.shared.pkg.c"] == {"zeroforge.shared.pkg.a",
                                               "zeroforge.shared.pkg.b"}
    found = cycles(graph)
    assert found == [["zeroforge.shared.pkg.a", "zeroforge.shared.pkg.b"]]
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError,
                       match="zeroforge.shared.pkg.a, zeroforge.shared.pkg.b"):
        test_the_package_has_no_import_cycles()
