"""benchmarks/compare_trees.py: the 'before' tree's modules are the ones its runs import,
for a tree with the ``zeroforge`` namespace (folders mapped in by the install) too."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "compare_trees.py"
sys.path.insert(0, str(_PATH.parent))  # compare_trees imports benchmarks/machine.py
_spec = importlib.util.spec_from_file_location("compare_trees", _PATH)
assert _spec and _spec.loader
compare_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_trees)


def imported_file(root: Path, module: str) -> str:
    """``module.__file__`` as a fresh interpreter with ``root`` first on its path sees it."""
    out = subprocess.run([sys.executable, "-c", f"import {module} as m; print(m.__file__)"],
                         env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True, cwd="/")
    return out.stdout.strip()


def test_a_namespace_tree_imports_its_own_mapped_folders(tmp_path):
    tree = tmp_path / "before"
    (tree / "zeroforge").mkdir(parents=True)
    (tree / "zeroforge" / "__init__.py").write_text("")
    (tree / "shared" / "nets").mkdir(parents=True)
    (tree / "shared" / "__init__.py").write_text("")
    (tree / "shared" / "nets" / "__init__.py").write_text("")
    (tree / "shared" / "nets" / "probe.py").write_text("WHO = 'before'\n")
    root = compare_trees.import_root(tree, tmp_path / "scratch")
    assert root == tmp_path / "scratch"
    # the installed zeroforge has no probe module: found at all, it is the tree's
    found = imported_file(root, "zeroforge.shared.nets.probe")
    assert Path(found).resolve() == (tree / "shared" / "nets" / "probe.py").resolve()
    # a second side in the same scratch folder reuses the links
    assert compare_trees.import_root(tree, tmp_path / "scratch") == root


def test_a_tree_from_before_the_namespace_is_its_own_root(tmp_path):
    (tmp_path / "shared").mkdir()
    assert compare_trees.import_root(tmp_path, tmp_path / "scratch") == tmp_path
