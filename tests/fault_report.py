"""What a fault test measured, for ``benchmarks/fault_table.py`` to print in its row.

With ``ZF_FAULT_REPORT=DIR`` set (the table sets it for each row it runs), ``report``
writes one small JSON file per test into DIR: the figures the test measured, e.g.
``{"appended": 812, "trained": 812, "lost": 0, "doubled": 0, "recovery_s": [4.1, 9.8]}``.
Without it ``report`` does nothing, so a plain pytest run writes no file. Plain data
(JSON), never pickles: the table reads it from another process.

Keys the table knows (and prints first, in this order, with their units): ``appended``
(distinct game ids in the stream), ``trained`` (in the final checkpoint exactly once),
``lost``, ``doubled`` (trained more than once), ``recovery_s`` (a number, or a list with
one figure per fault induced); any other key is printed as ``key value``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ENV = "ZF_FAULT_REPORT"

Figure = int | float | str | list[int | float] | list[str]


def report(**figures: Figure) -> Path | None:
    """Add ``figures`` to this test's report (a second call adds to the first; a key
    given again replaces its value); returns the file, or None when the table is not
    listening. Floats are rounded to 0.1 (lists too): figures, not noise."""
    where = os.environ.get(ENV)
    if not where:
        return None
    test = os.environ.get("PYTEST_CURRENT_TEST", "unknown").split(" ")[0]
    path = Path(where) / (re.sub(r"[^\w.-]+", "_", test) + ".json")
    old = json.loads(path.read_text())["figures"] if path.exists() else {}
    data = {"test": test, "figures": {**old, **{k: _round(v) for k, v in figures.items()}}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)
    return path


def _round(value: Figure) -> Figure:
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value
