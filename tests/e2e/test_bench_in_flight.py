"""benchmarks/bench_in_flight.py as a user runs it (``--quick``): a worker process with
its groups' requests over pipes to a real InferenceServer whose network is a timed
stand-in; the rows and the table come out, every request answered."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_quick_run_reports_the_ceiling_and_each_number_in_flight(tmp_path) -> None:
    rows = tmp_path / "rows.jsonl"
    r = subprocess.run(
        [sys.executable, "bench_in_flight.py", "--quick", "--in-flight", "1,2",
         "--jsonl", str(rows)],
        cwd=_DIR, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = {row["in_flight"]: row for row in map(json.loads, rows.read_text().splitlines())}
    assert set(got) == {0, 1, 2}
    assert all(row["positions_per_s"] > 0 for row in got.values())
    # one worker of B=8: one group sends up to 8 positions a request (leaves that end a
    # game are scored by the rules, not sent), two groups up to 4 each
    assert got[1]["requests_per_call"] == 1.0 and 6 <= got[1]["positions_per_call"] <= 8
    assert 3 <= got[2]["positions_per_call"] <= 8
    assert 1.0 <= got[2]["requests_per_call"] <= 2.0
    # every round trip includes the 10 ms stand-in, nothing answers faster
    assert got[1]["round_trip_p50_ms"] >= 10.0 and got[2]["round_trip_p50_ms"] >= 10.0
    table = r.stdout[r.stdout.index("| in flight |"):]
    assert "| ceiling (uniform, no server) |" in table and "\n| 2 |" in table
    assert "Traceback" not in r.stderr
