"""``bench_uct.py --compare`` as a user runs it, small: stepped and compiled rollouts
interleaved round by round, their rows kept (every game of the registry has a compiled
playout, so each can be compared)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_uct.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_compare_interleaves_stepped_and_compiled_rollouts(tmp_path):
    out = tmp_path / "uct.json"
    proc = bench("--game", "tictactoe", "--playouts", "40", "20", "--batches", "1", "3",
                 "--compare", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["game"] == "tictactoe" and doc["machine"].startswith("machine: ")
    order = [(r["round"], r["variant"], r["playouts"], r["batch"]) for r in doc["rows"]]
    assert order == [(round_, variant, n, batch) for round_ in (1, 2)
                     for variant in ("before", "after") for n in (40, 20) for batch in (1, 3)]
    assert all(r["playouts_per_s"] > 0 for r in doc["rows"])
    assert json.loads(proc.stdout[proc.stdout.index("{"):]) == doc  # printed as kept

