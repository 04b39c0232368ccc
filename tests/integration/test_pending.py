"""Actors the cluster has no room for yet are *pending*: the run shows them so in its
status, goes on with the others and counts no crash; a scale-down that drops them kills
them at once (they have played nothing) instead of leaving them waiting to be scheduled
only to stop, and a stop does not wait for them. On an autoscaling cluster pending actors
are what makes the autoscaler add nodes (``test_autoscaler.py``)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import ray

from tests.integration.test_distributed import start_run, status, wait_for
from zeroforge.deploy.ray.naming import run_actor_names


def _named_workers(run_id: str) -> list[int]:
    return [i for kind, i, _ in run_actor_names(run_id) if kind == "selfplay"]


@pytest.mark.parametrize("per_host, pending_rows", [
    # node hosts (the default): the three that no node holds wait in node-sized hosts, a
    # node being 2 CPUs: one of two workers and one of one, each a pending row
    (0, [("pending", 1), ("pending", 2)]),
    (1, [("pending", 1)] * 3)])  # one worker an actor: a pending row each
def test_workers_that_do_not_fit_stay_pending_then_go_at_once(
        local_ray, redis_server, run_id, tmp_path, per_host, pending_rows):
    # 2 CPUs: the learner (0.25) and one 1-CPU worker fit; a second one does not
    controller = start_run(redis_server, run_id, tmp_path, "distributed.worker_cpus=1",
                           f"distributed.workers_per_host={per_host}")
    try:
        wait_for(lambda: status(controller)["alive"]["selfplay"] == 1, timeout=120)
        ray.get(controller.scale.remote(workers=4))
        st = wait_for(lambda: (s := status(controller))["actor_states"]["selfplay"]
                      == {"alive": 1, "pending": 3} and s, timeout=30)
        assert st["waiting"]["selfplay"] == "3 waiting for 1 CPU each (free: 0.75 CPU)"
        rows = [r for r in st["actors"] if r["kind"] == "selfplay"]
        assert sorted((r["state"], r["workers"]) for r in rows) == [
            ("alive", 1), *pending_rows], rows
        games = st["games"]
        time.sleep(5)  # many monitor ticks (0.3 s): still pending, nothing counted as dead
        st = status(controller)
        assert st["actor_states"]["selfplay"] == {"alive": 1, "pending": 3}, st
        assert st["state"] == "running" and st["error"] == ""
        assert st["restarts"]["selfplay"] == 0 and st["alive"]["selfplay"] == 1
        wait_for(lambda: status(controller)["games"] > games, timeout=60)

        # scaling down drops the newest (the pending ones): killed now, not left to be
        # scheduled later
        ray.get(controller.scale.remote(workers=1))
        st = wait_for(lambda: (s := status(controller))["actor_states"]["selfplay"]
                      == {"alive": 1} and s, timeout=15)
        assert [r["index"] for r in st["actors"] if r["kind"] == "selfplay"] == [0]
        assert _named_workers(run_id) == [0]
        assert st["restarts"]["selfplay"] == 0 and st["error"] == ""

        # a stop with workers still pending ends at once and loses nothing
        ray.get(controller.scale.remote(workers=3))
        wait_for(lambda: status(controller)["actor_states"]["selfplay"].get("pending") == 2,
                 timeout=30)
        started = time.monotonic()
        final = ray.get(controller.stop.remote())
        assert time.monotonic() - started < 45
        assert final["state"] == "stopped" and final["error"] == "", final
        assert final["restarts"]["selfplay"] == 0
        assert final["games_received"] == final["games"] > 0
    finally:
        ray.get(controller.shutdown.remote())
        ray.kill(controller)


def test_minutes_spent_waiting_for_the_workers_are_not_the_runs(local_ray, redis_server,
                                                                  run_id, tmp_path):
    # run.minutes = 6 s; its one worker needs more CPUs than the cluster has: it waits,
    # and the run's minutes do not start (before, the run ended after 6 s, 0 games)
    controller = start_run(redis_server, run_id, tmp_path, "run.minutes=0.1",
                           "distributed.worker_cpus=5")
    try:
        st = wait_for(lambda: (s := status(controller))["actor_states"]["selfplay"]
                      == {"pending": 1} and s, timeout=60)
        assert "waiting for 5 CPU" in st["waiting"]["selfplay"]
        time.sleep(12)  # twice run.minutes, the worker pending throughout: not over yet
        st = status(controller)
        assert st["state"] == "running", st
        assert st["actor_states"]["selfplay"] == {"pending": 1}
    finally:
        ray.get(controller.shutdown.remote())
        ray.kill(controller)


@ray.remote
class _CpuHolder:
    """Holds CPUs of the cluster so that a replacement cannot be scheduled."""

    def ping(self) -> bool:
        return True


def test_a_stop_while_the_replacement_learner_waits_says_the_games_are_not_in_it(
        local_ray, redis_server, run_id, tmp_path):
    """The learner dies and its replacement cannot be scheduled (its CPU was taken): a stop
    then kills the pending replacement, so no learner drains the stream. The games since
    the last checkpoint are not in the final one; the stop says so (before, it ended
    "stopped" with no error) and leaves them in the stream for ``--resume``."""
    from zeroforge.learner.learner import load_checkpoint

    # 2 CPUs: the learner takes 1, the worker 0.25; a holder of 0.75 leaves none free
    controller = start_run(redis_server, run_id, tmp_path, "distributed.learner_cpus=1")
    holders = [_CpuHolder.options(num_cpus=0.75).remote()]
    try:
        wait_for(lambda: status(controller)["learner_steps"] >= 10
                 and (tmp_path / "checkpoint.pt").exists(), timeout=120)
        ray.get(holders[0].ping.remote(), timeout=60)
        learner = ray.get(controller.actor_handles.remote("learner"))[0]
        pid = ray.get(learner.pid.remote(), timeout=30)
        # queued before the kill, so Ray gives it the CPU the dead learner frees
        holders.append(_CpuHolder.options(num_cpus=1).remote())
        os.kill(pid, signal.SIGKILL)
        ray.get(holders[1].ping.remote(), timeout=60)
        st = wait_for(lambda: (s := status(controller))["actor_states"]["learner"]
                      == {"pending": 1} and s, timeout=60)
        assert st["restarts"]["learner"] == 1
        # games go on being appended with no learner to take them
        wait_for(lambda: status(controller)["games"] > st["games"] + 8, timeout=60)
        final = ray.get(controller.stop.remote())
        assert final["state"] == "stopped", final
        assert final["error"].startswith("the stop lost data: no learner ran at the stop"), \
            final["error"]
        assert final["lost"] == {"undrained": 1.0}
        saved = load_checkpoint(tmp_path / "checkpoint.pt")
        assert saved["extra"]["games_received"] < final["games"]
    finally:
        for holder in holders:
            ray.kill(holder)
        ray.get(controller.shutdown.remote())
        ray.kill(controller)
