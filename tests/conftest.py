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
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SLOW_DIRS = frozenset({"integration", "e2e", "multihost"})
"""Top-level test folders whose every test is in the slow lane."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = Path(item.path).resolve().relative_to(TESTS).parts[0]
        except ValueError:  # collected from outside tests/
            continue
        if top in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)
