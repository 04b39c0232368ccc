"""``bench_uct.py --compare`` as a user runs it, small: stepped and compiled rollouts
interleaved round by round, their rows kept; a game without a compiled playout is refused
in one line."""

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
    proc = bench("--game", "tictactoe", "--playouts", "40", "--batches", "1", "3",
                 "--compare", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["game"] == "tictactoe" and doc["machine"].startswith("machine: ")
    order = [(r["round"], r["variant"], r["batch"]) for r in doc["rows"]]
    assert order == [(1, "before", 1), (1, "before", 3), (1, "after", 1), (1, "after", 3),
                     (2, "before", 1), (2, "before", 3), (2, "after", 1), (2, "after", 3)]
    assert all(r["playouts"] == 40 and r["playouts_per_s"] > 0 for r in doc["rows"])
    assert json.loads(proc.stdout[proc.stdout.index("{"):]) == doc  # printed as kept


def test_compare_refuses_a_game_without_a_compiled_playout():
    proc = bench("--game", "fivestone", "--compare", "1", "--no-match")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "bench_uct: fivestone has no compiled playout to compare"
