"""benchmarks/gpu_run_report.py, the arithmetic of benchmarks/gpu_run.sh, on known scrapes
and nvidia-smi rows; and the script's one-line answer to a bad flag (its real run, on the
CPU: tests/e2e/test_gpu_run_script.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_run.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))  # the helper is a script, not a module of ours
import gpu_run_report as report  # noqa: E402


def _exposition(positions: float, steps: float, latency_buckets: dict[str, float],
                calls: float, batch_sum: float, fill_sum: float, trained: float,
                received: float) -> str:
    """A scrape of the run's /metrics with the series the report reads."""
    lines = [
        "# TYPE zeroforge_selfplay_positions_total counter",
        f'zeroforge_selfplay_positions_total{{worker="w0",worker_kind="selfplay"}} {positions}',
        f'zeroforge_selfplay_positions_total{{worker="w1",worker_kind="selfplay"}} {positions}',
        "# TYPE zeroforge_nn_evaluations_total counter",
        f'zeroforge_nn_evaluations_total{{source="server"}} {batch_sum}',
        "# TYPE zeroforge_learner_steps_total counter",
        f"zeroforge_learner_steps_total {steps}",
        "# TYPE zeroforge_learner_samples_trained_total counter",
        f"zeroforge_learner_samples_trained_total {trained}",
        "# TYPE zeroforge_learner_positions_received_total counter",
        f"zeroforge_learner_positions_received_total {received}",
        "# TYPE zeroforge_learner_samples_per_insert_target gauge",
        "zeroforge_learner_samples_per_insert_target 8.0",
        "# TYPE zeroforge_inference_batch_size histogram",
        f'zeroforge_inference_batch_size_bucket{{le="+Inf",server="0"}} {calls}',
        f'zeroforge_inference_batch_size_count{{server="0"}} {calls}',
        f'zeroforge_inference_batch_size_sum{{server="0"}} {batch_sum}',
        "# TYPE zeroforge_inference_batch_fill_ratio histogram",
        f'zeroforge_inference_batch_fill_ratio_bucket{{le="+Inf",server="0"}} {calls}',
        f'zeroforge_inference_batch_fill_ratio_count{{server="0"}} {calls}',
        f'zeroforge_inference_batch_fill_ratio_sum{{server="0"}} {fill_sum}',
        "# TYPE zeroforge_inference_request_latency_seconds histogram",
    ]
    lines += [f'zeroforge_inference_request_latency_seconds_bucket{{le="{le}",server="0"}} {n}'
              for le, n in latency_buckets.items()]
    return "\n".join(lines) + "\n"


def test_figures_are_the_windows_rates_and_quantiles() -> None:
    before = report.parse_metrics(_exposition(
        100, 10, {"0.005": 10, "0.01": 10, "+Inf": 10}, 20, 2000, 4, 1000, 500))
    # 100 latency observations in the window: 50 at or under 5 ms, 49 in (5, 10] ms, one
    # above; 50 calls of 400 positions each (max_batch 1000: fill 0.4)
    after = report.parse_metrics(_exposition(
        600, 110, {"0.005": 60, "0.01": 109, "+Inf": 110}, 70, 22000, 24, 9000, 1500))
    f = report.figures(before, after, seconds=10.0)
    assert f["positions_per_s"] == pytest.approx(100.0)  # 2 workers x 500 / 10 s
    assert f["learner_steps_per_s"] == pytest.approx(10.0)
    assert f["evaluations_per_s"] == pytest.approx(2000.0)
    assert f["positions_per_call"] == pytest.approx(400.0)
    assert f["batch_fill"] == pytest.approx(0.4)
    assert f["samples_per_insert"] == pytest.approx(8.0)
    assert f["samples_per_insert_target"] == 8.0
    assert f["latency_p50_ms"] == pytest.approx(5.0)  # the 50th of 100: the top of 0-5 ms
    assert 9.0 < f["latency_p99_ms"] <= 10.0
    row = report.row({**f, "preset": "p", "replicas": 1, "inference": "server", "servers": 2,
                      "workers": 12, "games_in_parallel": 128})
    assert row[-3:-1] == ["n/a", "n/a"]  # no GPU samples
    assert "0.40 (400)" in row


def test_no_server_traffic_reads_as_not_applicable() -> None:
    empty = report.parse_metrics("")
    f = report.figures(empty, empty, seconds=5.0)
    assert f["batch_fill"] is None and f["latency_p50_ms"] is None
    assert f["positions_per_s"] == 0.0
    assert report.row({**f, "inference": "local"})[3] == "none (local nets)"


def test_gpu_sampler_summarises_every_gpu_sample() -> None:
    rows = iter([[["50", "1000"], ["70", "3000"]], [["90", "2000"], ["10", "500"]]])
    sampler = report.GpuSampler(read=lambda *q: next(rows, None), every_s=0.01)
    with sampler:
        while len(sampler.util) < 4:
            pass
    s = sampler.summary()
    assert s["gpu_util_mean"] == pytest.approx(55.0) and s["gpu_util_max"] == 90.0
    assert s["gpu_memory_max_mib"] == 3000.0


@pytest.mark.parametrize("args, needle", [
    (["--bogus"], "unknown option '--bogus'"),
    (["--window"], "--window needs a value"),
    (["--warmup", "soon"], "--warmup wants a number"),
    (["--replicas", "0"], "--replicas wants a count >= 1"),
    (["--set", "nonsense"], "--set wants SECTION.KEY=VALUE"),
])
def test_bad_flags_get_one_line(args: list[str], needle: str) -> None:
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr
