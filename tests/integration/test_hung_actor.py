"""An actor that stops answering (SIGSTOP, for good) is taken for hung after
``distributed.hang_s``, killed and replaced like a crashed one; the replacement learner
resumes from the checkpoint and the run trains on. Before, a learner stopped for good was
never replaced: the run waited with its workers paused."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import ray

from tests.integration.test_distributed import start_run, status, wait_for
from tests.processes import gone
from zeroforge.deploy.ray.private_api import NICENESS_ENV

NICENESS_AT_IMPORT = os.environ.get(NICENESS_ENV)
"""$RAY_worker_niceness as this module found it, before its Ray started."""


def test_a_learner_stopped_for_good_is_killed_and_replaced(local_ray, redis_server, run_id,
                                                           tmp_path):
    controller = start_run(redis_server, run_id, tmp_path, "distributed.hang_s=4")
    pid = None
    try:
        wait_for(lambda: status(controller)["learner_steps"] >= 10, timeout=120)
        learner = ray.get(controller.actor_handles.remote("learner"))[0]
        pid = ray.get(learner.pid.remote(), timeout=30)
        # the run's actors are not niced below other work (Ray's default is 15)
        assert os.getpriority(os.PRIO_PROCESS, pid) == 0
        # ... set for that cluster's start only, not left to later Rays of this process
        assert os.environ.get(NICENESS_ENV) == NICENESS_AT_IMPORT
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        st = wait_for(lambda: (s := status(controller))["restarts"]["learner"] == 1 and s,
                      timeout=60)
        assert time.monotonic() - stopped_at >= 4  # not before hang_s
        wait_for(lambda: gone(pid), timeout=30)
        pid = None
        before = st["learner_steps"]
        st = wait_for(lambda: (s := status(controller))["alive"]["learner"] == 1
                      and s["learner_steps"] >= before + 10 and s, timeout=120)
        assert st["state"] == "running" and st["error"] == ""
        final = ray.get(controller.stop.remote())
        assert final["state"] == "stopped" and final["error"] == "", final
        assert final["games_received"] == final["games"] > 0
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        ray.get(controller.shutdown.remote())
        ray.kill(controller)
