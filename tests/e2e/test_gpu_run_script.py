"""benchmarks/gpu_run.sh on the CPU: the GPU preset shrunk to fit two cores, its inference
server forced on (the server code path runs, on the CPU), one real distributed run
measured, stopped and cleaned up (the report's arithmetic: tests/unit/test_gpu_run_report.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from zeroforge.shared.games import make_game
from zeroforge.shared.players import load_net
from zeroforge.shared.run_files import snapshot_files

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_run.sh"
HAS_GPU = shutil.which("nvidia-smi") is not None

CPU_SIZED = ["net=tiny", "search.num_simulations=8", "selfplay.games_in_parallel=8",
             "selfplay.workers=1", "learner.min_replay=64", "learner.batch_size=32",
             "distributed.inference=server", "distributed.inference_servers=1",
             "inference.num_cpus=0.25", "distributed.worker_cpus=0.25",
             "distributed.learner_cpus=0.25", "distributed.learner_gpus=0",
             "distributed.evaluator=false"]
"""go9-gpu on two shared cores: a tiny net and search, one worker behind one server,
small reservations, and no GPU share for the learner (the CPU has none to give)."""


def _ours(marker: str, run_dir: Path) -> list[str]:
    """Processes whose environment carries ``marker`` (every process the script started
    inherits it: the driver, Ray's daemons and workers) or that work in ``run_dir``
    (redis-server: it rewrites its process title over its environment, and works in its
    data directory, ``RUN_DIR/redis``)."""
    found = []
    for p in psutil.process_iter(["pid", "name"]):
        try:
            if p.pid == os.getpid():
                continue
            if (p.environ().get("ZF_GPU_RUN_TEST") == marker
                    or Path(p.cwd()).is_relative_to(run_dir)):
                found.append(f"{p.pid} {p.info['name']}")
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_a_cpu_sized_run_prints_the_table_and_leaves_nothing(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    figures = tmp_path / "figures.json"
    sets = [a for s in CPU_SIZED for a in ("--set", s)]
    env = {**os.environ, "ZF_GPU_RUN_TEST": marker}
    try:
        r = subprocess.run(
            ["bash", str(SCRIPT), "--python", sys.executable, "--preset", "go9-gpu",
             "--warmup", "5", "--window", "15", "--start-timeout", "150", *sets,
             "--json", str(figures), "--log", str(tmp_path / "train.log"),
             "--run-dir", str(tmp_path / "run")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
        assert r.returncode == 0, r.stdout + r.stderr[-4000:]
        f = json.loads(figures.read_text())
        assert f["inference"] == "server" and f["servers"] == 1 and f["workers"] == 1
        assert f["positions_per_s"] > 0 and f["evaluations_per_s"] > 0
        assert f["learner_steps_per_s"] > 0
        assert f["batch_fill"] is not None and f["latency_p50_ms"] is not None
        assert f["run_id"].startswith("gpu-run-") and f["window_s"] >= 15
        # the table and the JSON line on stdout
        lines = r.stdout.strip().splitlines()
        assert lines[0].startswith("machine: ")
        header = next(i for i, line in enumerate(lines) if line.startswith("| preset |"))
        row = [c.strip() for c in lines[header + 2].strip("|").split("|")]
        assert row[0] == "go9-gpu" and row[1] == "1"
        if not HAS_GPU:
            assert f["gpu_util_mean"] is None and row[-3] == "n/a" and row[-2] == "n/a"
        assert json.loads(lines[-1])["run_id"] == f["run_id"]
        assert "stopped" in (tmp_path / "train.log").read_text()
    finally:
        left = _ours(marker, tmp_path / "run")
        for p in left:  # a failed run must not leave its processes to the next test
            pid = int(p.split()[0])
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
    assert not left, f"left behind: {left}"


@pytest.mark.slow
def test_gpu_device_runs_each_variant_of_a_preset_back_to_back(tmp_path: Path) -> None:
    """benchmarks/gpu_device.sh as it will take the before/after GPU rows of
    ``selfplay.batches_in_flight``, on this checkout's own environment: one CPU-sized run
    per variant, each measured, named and in the table, its weights brought back
    (``--keep-weights``: the last snapshot and the final checkpoint's weights, each a net
    that loads), nothing left running."""
    marker = uuid.uuid4().hex
    out = tmp_path / "out"
    sets = [a for s in [*CPU_SIZED, "learner.snapshot_every_s=4"] for a in ("--set", s)]
    # the runs' own directories (and their redis-servers) under tmp_path, found below
    env = {**os.environ, "ZF_GPU_RUN_TEST": marker, "OUT": str(out), "PYTHON": sys.executable,
           "ZF_RUN_DIRS": str(tmp_path)}
    try:
        r = subprocess.run(
            ["bash", str(ROOT / "benchmarks" / "gpu_device.sh"), "--no-bundle",
             "--presets", "go9-gpu", "--warmup", "5", "--window", "10", "--start-timeout",
             "150", *sets, "--variants",
             "selfplay.batches_in_flight=1 selfplay.batches_in_flight=2",
             "--keep-weights", "1"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        for groups in (1, 2):
            name = f"go9-gpu-batches_in_flight-{groups}"
            f = json.loads((out / f"{name}.json").read_text())
            assert f"selfplay.batches_in_flight={groups}" in f["overrides"]
            assert f["positions_per_s"] > 0 and f["batch_fill"] is not None
            # a run of 15 s or more snapshots every 4 s: the last one, then the final
            [(last, snapshot), (final, weights)] = snapshot_files(out / name)
            assert final > last >= 4
            for path in (snapshot, weights):
                net = load_net(path, make_game("go9"))  # the shape from the run's config
                assert sum(p.numel() for p in net.parameters()) > 0
        assert not list(tmp_path.glob("zf-gpu-runs.*"))  # the runs' directories are gone
        table = (out / "table.md").read_text()
        assert table.count("| go9-gpu | 1 |") == 2
    finally:
        left = _ours(marker, tmp_path)
        for p in left:
            with contextlib.suppress(psutil.Error):
                psutil.Process(int(p.split()[0])).kill()
    assert not left, f"left behind: {left}"
