"""Rewrite tests/slowest.txt from a pytest log's ``--durations`` table.

    python tests/update_slowest.py LOG   # LOG: the output of scripts/test (CI's log)

Each test's setup, call and teardown are summed; tests under 10 s are left out (they start
in their usual order). Tests the log does not time keep their old line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SLOWEST = Path(__file__).resolve().parent / "slowest.txt"
ROW = re.compile(r"^([0-9.]+)s (?:setup|call|teardown)\s+(\S+)$")
MIN_SECONDS = 10.0


def measured(log: str) -> dict[str, float]:
    """Seconds per node id from the ``slowest durations`` rows of a pytest log."""
    seconds: dict[str, float] = {}
    for line in log.splitlines():
        m = ROW.match(line.strip())
        if m:
            seconds[m[2]] = seconds.get(m[2], 0.0) + float(m[1])
    return seconds


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/update_slowest.py LOG", file=sys.stderr)
        return 2
    lines = SLOWEST.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines if line.startswith("#")]
    old = {line.split(maxsplit=1)[1]: float(line.split()[0])
           for line in lines if line.strip() and not line.startswith("#")}
    new = measured(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    if not new:
        print(f"update_slowest: no --durations rows in {argv[0]}", file=sys.stderr)
        return 1
    merged = {**old, **new}
    rows = sorted(((s, n) for n, s in merged.items() if s >= MIN_SECONDS), reverse=True)
    SLOWEST.write_text("\n".join([*header, *(f"{round(s)} {n}" for s, n in rows)]) + "\n",
                       encoding="utf-8")
    print(f"{SLOWEST}: {len(rows)} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
