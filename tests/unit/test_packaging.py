"""The package as it installs. pyproject.toml maps top-level folders into one import package,
``zeroforge``, and lists its packages one by one (docs/architecture.md, "Layout"):

- fast: that list is exactly the folders with an ``__init__.py`` under the mapped folders,
  so a new subpackage left out of it fails here and not in someone's installed copy;
- slow: a wheel built from the sources alone holds ``zeroforge`` and nothing beside it, with
  every module and data file; installed into a fresh venv (no editable import hook there),
  the ``zeroforge`` command answers, trains a few steps of tic-tac-toe from a preset and
  serves the play board's pages, all read from the installed files.
"""

from __future__ import annotations

import contextlib
import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.web_board import play_board

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
VERSION = PYPROJECT["project"]["version"]

SKIP_DIRS = {"__pycache__", "node_modules"}


def package_folders() -> dict[str, Path]:
    """Dotted name -> folder of every package under pyproject's mapped folders (a folder
    with an ``__init__.py``, named after its place under the mapped one)."""
    found: dict[str, Path] = {}
    for name, folder in SETUPTOOLS["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if not any(part in SKIP_DIRS or part.startswith(".") for part in rel):
                found[".".join((name, *rel))] = init.parent
    return found


def data_packages() -> set[str]:
    """Listed packages that are folders of data files only (no module, no ``__init__``:
    the presets in deploy/configs), which setuptools wants listed like the others."""
    out = set()
    for name in SETUPTOOLS["packages"]:
        for prefix, folder in SETUPTOOLS["package-dir"].items():
            if name.startswith(prefix + "."):
                path = ROOT / folder / Path(*name[len(prefix) + 1:].split("."))
                if path.is_dir() and not any(path.glob("*.py")) and any(path.iterdir()):
                    out.add(name)
    return out


def test_the_package_list_is_every_folder_with_an_init() -> None:
    assert len(SETUPTOOLS["packages"]) == len(set(SETUPTOOLS["packages"])), \
        "a package is listed twice"
    listed = set(SETUPTOOLS["packages"]) - data_packages()
    found = set(package_folders())
    assert listed == found, (
        f"pyproject.toml [tool.setuptools] packages: not a folder with an __init__.py: "
        f"{sorted(listed - found)}; folders with one, not listed (a wheel would leave them "
        f"out): {sorted(found - listed)}")
    # A folder of modules without an __init__.py would be left out silently too.
    for name, folder in SETUPTOOLS["package-dir"].items():
        for module in (ROOT / folder).rglob("*.py"):
            rel = module.parent.relative_to(ROOT / folder).parts
            if not any(part in SKIP_DIRS or part.startswith(".") for part in rel):
                assert (module.parent / "__init__.py").is_file(), \
                    f"{module.relative_to(ROOT)}: its folder is no package of {name}"


# --- the wheel, installed -----------------------------------------------------------------


def run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of what a build needs: pyproject.toml, README.md and the
    mapped folders (the build context deploy/Dockerfile copies; a copy also keeps stale
    files of an earlier build/ out, and this checkout's build/ untouched)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in set(SETUPTOOLS["package-dir"].values()):
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns(*SKIP_DIRS, "*.pyc"))
    dist = tmp_path_factory.mktemp("dist")
    r = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
             "--quiet", "--wheel-dir", str(dist), str(src)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    [built] = dist.glob("*.whl")
    return built


@dataclass(frozen=True)
class Installed:
    venv: Path
    env: dict[str, str]
    cwd: Path

    @property
    def exe(self) -> str:
        return str(self.venv / "bin" / "zeroforge")

    def zf(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run([self.exe, *args], timeout=timeout, cwd=self.cwd, env=self.env)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv with the wheel and nothing else installed; the dependencies come from
    the test's own environment through a ``.pth`` path line (which adds the directory only:
    the ``.pth`` files there, the editable install's import hook among them, stay
    unprocessed, so ``zeroforge`` can only come from the wheel)."""
    venv = tmp_path_factory.mktemp("venv")
    r = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    assert r.returncode == 0, r.stderr
    python = venv / "bin" / "python"
    r = run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
             "--no-deps", "--no-index", str(wheel)], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            timeout=60)
    site = Path(r.stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    cwd = tmp_path_factory.mktemp("cwd")  # not the checkout: nothing to import from there
    return Installed(venv, env, cwd)


@pytest.mark.slow
def test_the_wheel_holds_one_package_with_all_its_files(wheel: Path) -> None:
    assert wheel.name == f"zeroforge-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = f"zeroforge-{VERSION}.dist-info"
        assert zf.read(f"{dist_info}/top_level.txt").decode().split() == ["zeroforge"]
        metadata = email.parser.Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
        assert metadata["Version"] == VERSION
    stray = sorted(n for n in names if not n.startswith(("zeroforge/", f"{dist_info}/")))
    assert stray == [], f"files outside zeroforge/ in the wheel: {stray}"
    expected = set()
    for name, folder in package_folders().items():
        where = name.replace(".", "/")
        expected |= {f"{where}/{m.name}" for m in folder.glob("*.py")}
        for pattern in SETUPTOOLS["package-data"].get(name, []):
            expected |= {f"{where}/{f.relative_to(folder).as_posix()}"
                         for f in folder.glob(pattern)}
    presets = sorted((ROOT / "deploy" / "configs").glob("*.yaml"))
    assert presets, "no preset files in deploy/configs"
    expected |= {f"zeroforge/deploy/configs/{p.name}" for p in presets}
    expected |= {"zeroforge/deploy/play/board.html", "zeroforge/deploy/play/board.js"}
    assert sorted(expected - names) == [], "missing from the wheel"


@pytest.mark.slow
def test_installed_from_the_wheel_the_command_answers(installed: Installed) -> None:
    r = run([str(installed.venv / "bin" / "python"), "-c",
             "import zeroforge, zeroforge.deploy; print(zeroforge.__file__); "
             "print(zeroforge.deploy.__file__); print(zeroforge.__version__)"],
            timeout=60, cwd=installed.cwd, env=installed.env)
    assert r.returncode == 0, r.stderr
    root_file, deploy_file, version = r.stdout.split()
    for f in (root_file, deploy_file):
        assert Path(f).resolve().is_relative_to(installed.venv.resolve()), \
            f"{f}: not the wheel's copy in {installed.venv}"
    assert version == VERSION
    r = installed.zf("--help")
    assert r.returncode == 0 and "train" in r.stdout and "play" in r.stdout, r.stderr
    r = installed.zf("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"zeroforge {VERSION}"
    r = installed.zf("games")
    assert r.returncode == 0, r.stderr
    assert "tictactoe" in r.stdout and "presets:" in r.stdout


@pytest.mark.slow
def test_installed_from_the_wheel_a_short_local_run(installed: Installed) -> None:
    """The tictactoe preset (a YAML file in the wheel), tiny and for a few steps; the run
    dir gets what a run leaves there."""
    r = installed.zf(
        "train", "--local", "--config", "tictactoe", "--steps", "10", "--minutes", "2",
        "--run-dir", "run", "--set", "net=tiny", "--set", "search.num_simulations=12",
        "--set", "selfplay.games_in_parallel=8", "--set", "learner.min_replay=64",
        "--set", "learner.batch_size=32", "--set", "evaluation.games=4",
        "--set", "run.progress_every_s=1", timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "score vs random" in r.stdout and "checkpoint: run/checkpoint.pt" in r.stdout
    run_dir = installed.cwd / "run"
    for name in ("checkpoint.pt", "config.yaml", "run.json", "status.json", "eval.jsonl",
                 "history.jsonl"):
        assert (run_dir / name).is_file(), f"no {name} in the run dir: {os.listdir(run_dir)}"
    assert list((run_dir / "games" / "eval").glob("*.sgf")), "no evaluation game records"


def board(installed: Installed) -> contextlib.AbstractContextManager[str]:
    """``zeroforge play --web`` from the installed wheel; its URL while it runs."""
    return play_board([installed.exe], cwd=installed.cwd, env=installed.env)


@pytest.mark.slow
def test_installed_from_the_wheel_the_play_board_serves_its_pages(installed: Installed) -> None:
    play = ROOT / "deploy" / "play"
    with board(installed) as url:
        with urllib.request.urlopen(url, timeout=30) as answer:
            page = answer.read()
        with urllib.request.urlopen(url + "board.js", timeout=30) as answer:
            script = answer.read()
    # On loopback there is no token: the page's {{QS}} placeholders become "".
    assert page == (play / "board.html").read_text(encoding="utf-8").replace(
        "{{QS}}", "").encode()
    assert script == (play / "board.js").read_bytes()
