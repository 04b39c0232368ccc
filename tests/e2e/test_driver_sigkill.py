"""A distributed ``zeroforge train`` killed with SIGKILL (no handler, no atexit) leaves
nothing running: its redis-server (own session; ended by PR_SET_PDEATHSIG) and the local
Ray cluster it started (Ray's own processes, the controller and the detached actors) go
with it."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid

import psutil

from tests.e2e.runs import TrainProcess


def _alive(procs: list[psutil.Process]) -> list[str]:
    alive = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{p.pid} {p.name()}")
    return alive


def test_a_sigkilled_driver_leaves_no_redis_server_and_no_ray(tmp_path):
    run_id = f"sigkill-{uuid.uuid4().hex[:8]}"
    with TrainProcess(tmp_path / "run", run_id, "--set", "selfplay.workers=1") as train:
        train.wait_for("steps ")  # a progress line: actors up, the learner training
        driver = psutil.Process(train.proc.pid)
        family = driver.children(recursive=True)
        redis = [p for p in family if p.name().startswith("redis-server")]
        assert len(redis) == 1, [p.name() for p in family]
        ray_procs = [p for p in family if p not in redis]
        assert ray_procs, "no Ray processes found under the driver"
        os.kill(train.proc.pid, signal.SIGKILL)
        train.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(redis) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(redis) == [], "redis-server outlived the SIGKILLed driver"
        # Ray's raylet and GCS die with the driver (Ray's own fate sharing), workers and
        # actors with the raylet; its two agents notice a dead raylet later (they first
        # try to tell the dead GCS), so they get longer
        agents = [p for p in ray_procs if "Agent" in _name(p)]
        core = [p for p in ray_procs if p not in agents]
        deadline = time.monotonic() + 30
        while _alive(core) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(core) == [], "Ray processes outlived the SIGKILLed driver"
        deadline = time.monotonic() + 150
        while _alive(agents) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _alive(agents) == [], "Ray's agents outlived the SIGKILLed driver"


def _name(p: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(p.cmdline()) or p.name()
    return ""
