"""Test lanes.

Everything under ``tests/integration``, ``tests/e2e`` and ``tests/multihost`` (real
redis-servers, local Ray clusters, the netns multi-host bed, CLI subprocesses, short training
runs) is marked ``slow`` here, by directory, so a new test file there joins the slow lane
without a decorator; a slow test elsewhere carries
``@pytest.mark.slow`` itself.

- ``scripts/test`` (README, CI): set-up, lint and type check, then ``python -m pytest -q``,
  the whole suite.
- ``scripts/test -m "not slow"`` (or ``python -m pytest -q -m "not slow"``): the fast lane,
  unit and contract tests.

``scripts/test`` runs the tests in parallel (pytest-xdist, ``-n``): most slow tests wait on
processes, heartbeats and timeouts rather than compute, so several share two cores. Every
test starts what it needs on free ports with its own run id, Ray cluster and run directory,
so tests in different worker processes never meet. The modules with the longest tests
(``slowest.txt``) are collected first, so that no worker is left with one of them at the end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SLOW_DIRS = frozenset({"integration", "e2e", "multihost"})
"""Top-level test folders whose every test is in the slow lane."""
SLOWEST = TESTS / "slowest.txt"
"""``SECONDS NODEID`` lines: the tests that take longest, measured (``--durations``)."""


def known_seconds(path: Path = SLOWEST) -> dict[str, float]:
    """Measured seconds per test node id (tests not in the file: none known)."""
    seconds = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            value, node = line.split(maxsplit=1)
            seconds[node] = float(value)
    return seconds


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = Path(item.path).resolve().relative_to(TESTS).parts[0]
        except ValueError:  # collected from outside tests/
            continue
        if top in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)
    # the modules with the longest tests first, each module's tests together and in their
    # usual order (a stable sort): a parallel run hands tests out in this order, so the long
    # ones overlap instead of ending the run alone, and a module's fixtures (a Ray cluster,
    # the network bed) are built once per worker process rather than once per test
    seconds = known_seconds()
    longest: dict[Path, float] = {}
    for item in items:
        longest[item.path] = max(longest.get(item.path, 0.0), seconds.get(item.nodeid, 0.0))
    items.sort(key=lambda item: -longest[item.path])
