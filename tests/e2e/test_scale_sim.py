"""The load simulator as a user runs it, small: its JSON has the promised keys, no game is
lost, and with the per-node weight cache a publish costs Redis about one blob per node."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def simulate(tmp_path, *extra: str) -> dict:
    out = tmp_path / "sim.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale_sim_bare.py"), "--workers", "24",
         "--minutes", "0.4", "--publish-every-s", "6", "--record", "8", "--nodes", "2",
         "--json", str(out), *extra],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_simulator_loses_nothing_and_fans_weights_out_per_node(tmp_path):
    doc = simulate(tmp_path)
    for key in ("workers", "lost_games", "controller_cores", "redis_bytes_per_publish",
                "weights_p99_s"):
        assert key in doc
    assert doc["workers"] == 24 and doc["lost_games"] == 0
    assert doc["games_appended"] == doc["games_received"] > 0
    assert doc["publishes"] >= 3
    # each publish leaves the run's Redis once per node (2), plus the workers' polls
    assert 1.9 <= doc["redis_bytes_per_publish_in_blobs"] < 4, doc
    assert doc["weight_fetches"]["node_cache"] > doc["weight_fetches"]["redis"]
    assert doc["weights_p99_s"] is not None and doc["weights_p99_s"] < 30


def test_without_the_cache_every_worker_fetches_from_redis(tmp_path):
    doc = simulate(tmp_path, "--no-node-cache", "--shards", "1", "--stream-servers", "0")
    assert doc["lost_games"] == 0 and doc["node_cache"] is False
    assert doc["redis_bytes_per_publish_in_blobs"] >= 20, doc  # ~24: one per worker
