"""kill -9 of a run's controller: the driver's handle starts a successor that adopts the
live actors (detached, named by run, kind and index) and carries the run on with its
predecessor's desired counts, restarts, crash windows, counters and metrics URL.

A real local Ray (2 CPUs) and the real bundled redis-server; the controller, a worker and
the learner are killed by pid with SIGKILL.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import signal
import time
import urllib.request

import pytest
import ray

from tests.fault_report import report
from tests.integration.test_chaos import checkpoint_received
from tests.integration.test_distributed import SETTINGS, wait_for
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.handle import ControllerLost, RunHandle, start_run
from zeroforge.deploy.ray.naming import NAMESPACE, controller_name, run_actor_names
from zeroforge.learner.learner import load_checkpoint
from zeroforge.shared.transport import free_port

COUNTERS = ("games", "games_received", "learner_steps", "positions")


def _pids(handle: RunHandle, kind: str) -> list[int]:
    return sorted(ray.get([h.pid.remote() for h in handle.actor_handles(kind)]))


def _takeover(handle: RunHandle) -> None:
    """Poll as the driver does until the handle has replaced the dead controller."""
    wait_for(handle.keep_alive, timeout=60, every=0.2)


@pytest.mark.parametrize("per_host, selfplay_rows", [
    (0, [0]),  # node hosts, the default: both workers in one host
    (1, [0, 1])])  # an actor a worker
def test_a_killed_controller_is_replaced_and_adopts_the_live_actors(
        local_ray, redis_server, run_id, tmp_path, per_host, selfplay_rows):
    port = free_port()
    config = load_train_config(None, [*SETTINGS, "selfplay.workers=2",
                                      f"run.metrics_port={port}",
                                      f"distributed.workers_per_host={per_host}"])
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(tmp_path))
    handle = start_run(config, ctx, max_crashes={"selfplay": 100})
    try:
        wait_for(lambda: handle.keep_alive() is False and (
            st := handle.status_json())["learner_steps"] > 0 and st["games"] > 0
            and st["alive"]["selfplay"] == 2)
        before = handle.status_json()
        assert before["metrics_url"] == f"http://127.0.0.1:{port}/metrics"
        rows = {(r["kind"], r["index"]): r for r in before["actors"]}
        assert set(rows) == {("learner", 0), *(("selfplay", i) for i in selfplay_rows)}
        assert all(r["state"] == "alive" for r in rows.values())
        workers, [learner] = _pids(handle, "selfplay"), _pids(handle, "learner")
        wait_for(lambda: sorted(r["pid"] for r in handle.status_json()["actors"]
                                if r["kind"] == "selfplay") == workers)

        # 1. the controller alone: every actor is adopted, nothing is restarted
        os.kill(handle.controller_pid(), signal.SIGKILL)
        killed = time.monotonic()
        _takeover(handle)
        takeover_s = [time.monotonic() - killed]
        assert handle.controller_restarts == 1
        after = handle.status_json()
        assert after["metrics_url"] == before["metrics_url"]
        assert after["restarts"] == before["restarts"]
        assert after["desired"] == before["desired"]
        assert after["elapsed_s"] >= before["elapsed_s"]
        for key in COUNTERS:
            assert after[key] >= before[key], key
        assert _pids(handle, "selfplay") == workers and _pids(handle, "learner") == [learner]
        with urllib.request.urlopen(after["metrics_url"], timeout=10) as reply:
            assert b"zeroforge_learner_steps_total" in reply.read()

        # 2. a scale-down, then the controller and a worker die together: the successor
        # keeps the desired count, counts the worker's death and replaces it
        handle.scale(workers=1)
        wait_for(lambda: handle.status_json()["alive"]["selfplay"] == 1)
        [worker] = _pids(handle, "selfplay")  # the one worker's actor, or its host
        handle.keep_alive()
        os.kill(handle.controller_pid(), signal.SIGKILL)
        os.kill(worker, signal.SIGKILL)
        killed = time.monotonic()
        _takeover(handle)
        takeover_s.append(time.monotonic() - killed)
        st = wait_for(lambda: (s := handle.status_json())["alive"]["selfplay"] == 1 and s)
        assert st["desired"]["selfplay"] == 1
        assert st["restarts"]["selfplay"] == 1
        assert _pids(handle, "selfplay") != [worker]
        assert _pids(handle, "learner") == [learner]

        # 3. the CLI's view (a handle found by name) works with the successor
        cli = RunHandle(run_id, ray.get_actor(controller_name(run_id), namespace=NAMESPACE))
        assert cli.status().run_id == run_id
        assert cli.scale(workers=2)["selfplay"] == 2
        wait_for(lambda: handle.status_json()["alive"]["selfplay"] == 2)
        steps = handle.status_json()["learner_steps"]
        wait_for(lambda: handle.status_json()["learner_steps"] > steps)

        final = handle.stop()
        assert final.state == "stopped", final.error
        assert not final.error
        saved = load_checkpoint(tmp_path / "checkpoint.pt")["extra"]
        ids = checkpoint_received(saved)
        assert not [i for i, n in collections.Counter(ids).items() if n > 1]
        assert final.games_received == saved["games_received"] == len(ids)
        assert final.games >= final.games_received
        assert final.stream_lag == 0  # the final status is read after the final acks
        report(recovery_s=takeover_s, trained=len(ids), doubled=len(ids) - len(set(ids)),
               final_lag=final.stream_lag)
    finally:
        handle.shutdown()
    # detached actors do not outlive the run
    assert run_actor_names(run_id) == []


def test_a_failed_run_leaves_no_detached_actor(local_ray, redis_server, run_id, tmp_path):
    """Actors that cannot start (a wrong Redis password) fail the run; its shutdown
    kills every actor of the run, detached or not."""
    config = load_train_config(None, SETTINGS)
    bad_url = redis_server.url.replace("://:", "://:wrong", 1)
    ctx = dataclasses.replace(config.context(run_id, bad_url), run_dir=str(tmp_path))
    handle = start_run(config, ctx)
    try:
        wait_for(lambda: handle.status_json()["state"] == "failed", 150)
    finally:
        handle.shutdown()
    deadline = time.monotonic() + 10
    while run_actor_names(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert run_actor_names(run_id) == []


def test_a_controller_that_keeps_dying_fails_the_run(local_ray, redis_server, run_id, tmp_path):
    """Past its limit a dead controller is not replaced: one line naming the run, and
    the shutdown that follows leaves nothing of the run."""
    config = load_train_config(None, SETTINGS)
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(tmp_path))
    handle = start_run(config, ctx, max_controller_deaths=0)
    try:
        wait_for(lambda: handle.status_json()["alive"]["learner"] == 1)
        os.kill(handle.controller_pid(), signal.SIGKILL)
        with pytest.raises(ControllerLost, match=f"run {run_id} died 1 times"):
            wait_for(handle.keep_alive, timeout=60, every=0.2)
    finally:
        handle.shutdown()
    assert run_actor_names(run_id) == []
