"""kill -9 of a distributed run's controller, seen from the terminals: the driver prints
one warning line and carries on with a successor that adopted the live actors; `zeroforge
status`, `scale` and `stop` from another terminal work with it; the run ends cleanly and
leaves nothing running."""

from __future__ import annotations

import os
import signal
import time
import uuid

import psutil

from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import zf


def _controller(driver_pid: int) -> psutil.Process:
    found = [p for p in psutil.Process(driver_pid).children(recursive=True)
             if "ray::Controller" in " ".join(p.cmdline())]
    assert len(found) == 1, found
    return found[0]


def _until(check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"condition not met within {timeout} s")


def test_status_scale_and_stop_work_after_the_controller_is_killed(tmp_path):
    run_dir = tmp_path / "run"
    run_id = f"ctl-{uuid.uuid4().hex[:8]}"
    where = ("--run-dir", str(run_dir))
    with TrainProcess(run_dir, run_id) as train:
        train.wait_for("metrics at http://127.0.0.1:")
        before = _until(lambda: (st := train.status())["games_received"] > 0 and st)
        pids = sorted(row["pid"] for row in before["actors"])
        assert len(pids) == 2 and all(pids)  # the learner and one worker
        dead = _controller(train.proc.pid)
        os.kill(dead.pid, signal.SIGKILL)
        train.wait_for(f"the controller of run {run_id} died", timeout=90)
        [line] = [x for x in train.lines if "the controller of run" in x]
        assert line.startswith("zeroforge train: warning: ") and "adopted 2 live actors" in line
        assert _controller(train.proc.pid).pid != dead.pid
        after = train.status()
        assert after["state"] == "running" and after["metrics_url"] == before["metrics_url"]
        assert sorted(row["pid"] for row in after["actors"]) == pids  # adopted, not new
        assert after["restarts"] == before["restarts"]
        assert after["games_received"] >= before["games_received"]
        r = zf("scale", "--workers", "2", *where)
        assert r.returncode == 0 and "selfplay 2" in r.stdout, r.stderr
        _until(lambda: train.status()["alive"]["selfplay"] == 2)
        r = zf("stop", *where)
        assert r.returncode == 0 and "stopped after" in r.stdout, r.stderr
        assert train.wait(timeout=120) == 0, train.output
        assert f"run {run_id} stopped" in train.output
        deadline = time.monotonic() + 30
        while train.descendants_alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert train.descendants_alive() == []
