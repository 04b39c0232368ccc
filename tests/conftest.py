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

``scripts/test`` runs the tests in three processes (pytest-xdist, ``-n``; ``ZF_TEST_WORKERS``
sets how many): most slow tests wait on processes, heartbeats and timeouts rather than
compute, and their runs keep each self-play worker to a quarter core
(``selfplay.cpu_share``), so several share two cores. Every test starts what it needs on
free ports with its own run id, Ray cluster and run directory, so tests in different worker
processes never meet. The longest tests (``slowest.txt``) are handed out first, so that no
process is left with one of them at the end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# One compute thread per process, for the tests' processes and all they start (the
# variables are inherited; Ray's workers get their own from Ray). torch's intra-op threads
# spin while they wait: in a parallel suite, two processes training on two threads each
# spun against each other, and an 11-second training in a test took 183 s. What a test
# checks does not depend on the thread count; a test that sets one still gets it.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

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


def shares_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture (a Ray cluster, the network bed): its
    module's tests then run in one process, which builds the fixture once."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(
        d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            top = Path(item.path).resolve().relative_to(TESTS).parts[0]
        except ValueError:  # collected from outside tests/
            continue
        if top in SLOW_DIRS:
            item.add_marker(pytest.mark.slow)
    # The parallel run (--dist loadgroup) hands out one unit at a time, in this order, to
    # whichever process is free: a module whose tests share a module-scoped fixture is one
    # unit, every other test a unit of its own. Longest first (a stable sort, so a module's
    # tests stay together), so that the long units overlap instead of ending the run alone.
    if not config.getoption("numprocesses", None):
        return  # one process: the usual order
    seconds = known_seconds()
    grouped = {item.path for item in items if shares_module_fixture(item)}
    module_seconds: dict[Path, float] = {}
    for item in items:
        module_seconds[item.path] = module_seconds.get(item.path, 0.0) + seconds.get(
            item.nodeid, 0.0)
        if item.path in grouped:
            item.add_marker(pytest.mark.xdist_group(
                name=str(Path(item.path).relative_to(TESTS.parent))))
    items.sort(key=lambda item: -(module_seconds[item.path] if item.path in grouped
                                  else seconds.get(item.nodeid, 0.0)))
