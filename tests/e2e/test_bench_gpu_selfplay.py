"""bench_gpu_selfplay on the CPU: the pipe between a self-play worker process and the
server carries raw arrays both ways unchanged, and a short run of real worker processes
behind a real InferenceServer reports positions played and network calls merged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(_DIR))  # the script imports its neighbours by plain name
import bench_gpu_selfplay as bench  # noqa: E402


class _Loopback:
    """One end of a pipe whose requests are answered by ``answer`` (bytes -> bytes)."""

    def __init__(self, answer) -> None:
        self.answer, self.sent = answer, b""

    def send_bytes(self, data: bytes) -> None:
        self.sent = data

    def recv_bytes(self) -> bytes:
        return self.answer(self.sent)


def test_pipe_requests_and_answers_round_trip() -> None:
    obs_shape, actions = (4, 6, 6), 36
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 2, (5, *obs_shape), dtype=np.uint8)
    legal = rng.random((5, actions)) < 0.5
    logits = rng.standard_normal((5, actions)).astype(np.float32)
    value = rng.standard_normal(5).astype(np.float32)
    seen = {}

    def answer(request: bytes) -> bytes:
        seen["obs"], seen["legal"] = bench.decode_request(request, obs_shape, actions)
        return logits.tobytes() + value.tobytes() + np.int64(7).tobytes()

    ev = bench.PipeEvaluator(_Loopback(answer), actions).evaluate(obs, legal)
    np.testing.assert_array_equal(seen["obs"], obs)
    np.testing.assert_array_equal(seen["legal"], legal)
    np.testing.assert_array_equal(ev.policy_logits, logits)
    np.testing.assert_array_equal(ev.value, value)
    assert ev.weights_version == 7


@pytest.mark.slow
def test_worker_processes_behind_one_server_report_a_row(tmp_path) -> None:
    rows = tmp_path / "rows.jsonl"
    r = subprocess.run(
        [sys.executable, "bench_gpu_selfplay.py", "--game", "gomoku6", "--net", "tiny",
         "--workers", "2", "--batch", "4", "--simulations", "4", "--seconds", "3",
         "--warmup", "1", "--modes", "float32", "--device", "cpu", "--jsonl", str(rows)],
        cwd=_DIR, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    [row] = [json.loads(line) for line in rows.read_text().splitlines()]
    assert row["game"] == "gomoku6" and row["mode"] == "float32" and row["device"] == "cpu"
    assert row["positions_per_s"] > 0 and row["evals_per_s"] > 0
    # two workers' leaf batches of 4: merged calls hold 4 to 8 positions
    assert 4 <= row["positions_per_call"] <= 8 and 1 <= row["requests_per_call"] <= 2
    assert "| gomoku6 | float32 |" in r.stdout and "Traceback" not in r.stderr
