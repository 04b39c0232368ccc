"""Before/after tables from ``compare_trees.py`` documents: each round's printed table is
the raw row, and the figure of each setup is read back out of it."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal

from report_layout import DataDir, Table

Pick = Callable[[str], Decimal]
"""Reads one setup's figure out of one round's printed output."""


def _markdown_cell(setup: str, column: int) -> Pick:
    """The ``column``-th cell of the markdown row whose first cell is ``setup``."""
    def pick(stdout: str) -> Decimal:
        for line in stdout.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == setup:
                return Decimal(cells[column].replace(",", ""))
        raise ValueError(f"no row {setup!r} in a round's output")
    return pick


def _text_column(setup: str) -> Pick:
    """The first number after ``setup`` on its line of a plain-text table."""
    def pick(stdout: str) -> Decimal:
        m = re.search(rf"^{re.escape(setup)}\s+([\d.]+)", stdout, re.MULTILINE)
        if not m:
            raise ValueError(f"no line {setup!r} in a round's output")
        return Decimal(m[1])
    return pick


def tenth(x: Decimal) -> str:
    """A tenth, a half rounded up: the rounds print figures in decimals, and a median of
    two of them (60.3, 60.4) is exactly 60.35, which binary floats would round down."""
    return str(x.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def compare(data: DataDir, name: str, first: str, setups: Sequence[tuple[str, Pick]],
            ratio_head: str) -> Table:
    """One row a setup: every round's figure before and after, their medians and the
    ratio of the medians as the table shows them."""
    rounds = data.load(name)["rounds"]
    rows = []
    for label, pick in setups:
        before = [pick(r["stdout"]) for r in rounds["before"]]
        after = [pick(r["stdout"]) for r in rounds["after"]]
        mb, ma = tenth(statistics.median(before)), tenth(statistics.median(after))
        rows.append([label, ", ".join(tenth(v) for v in before), mb,
                     ", ".join(tenth(v) for v in after), ma, f"{float(ma) / float(mb):.2f}"])
    n_b, n_a = len(rounds["before"]), len(rounds["after"])
    header = (first, f"before ({n_b} rounds)", "median", f"after ({n_a} rounds)", "median",
              ratio_head)
    return Table(header, rows, frozenset({2, 4, 5}))


def selfplay_by_batch(data: DataDir, name: str) -> Table:
    """Self-play positions/s of ``bench_selfplay.py`` before and after a change, a row a
    batch size (B = 64, 128), from the ``compare_trees.py`` document ``name``: the
    ``zeroforge`` namespace (issue 22) and issue 26's throughput goal on each host (before:
    the bench's float32, its only precision then; after: the presets' ``precision: fast``)."""
    setups = [(str(b), _markdown_cell(f"zeroforge B={b}", 1)) for b in (64, 128)]
    table = compare(data, name, "B", setups, "after ÷ before")
    return Table(table.header, table.rows, table.right | {0})


def namespace_learner(data: DataDir) -> Table:
    """Learner ms a step before and after the ``zeroforge`` namespace (issue 22)."""
    setups = [("float32, NCHW", _text_column("float32 nchw")),
              ("float32, channels-last", _text_column("float32")),
              ("bfloat16, channels-last", _text_column("bfloat16"))]
    return compare(data, "namespace-learner.json", "setup", setups, "after ÷ before (time)")
