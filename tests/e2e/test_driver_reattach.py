"""A driver killed on a cluster it joined (``--address``): the run's detached actors go on;
the same command again re-attaches to them; with no driver for ``distributed.lease_s``
they end themselves (the learner after its checkpoint), and the same command then
resumes from that checkpoint. Nothing stays running after a stop."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from tests.e2e.ray_head import RayHead
from tests.e2e.runs import TrainProcess
from tests.e2e.test_cli import zf

LEASE_S = 30
"""Long enough for a second driver to start and re-attach on a busy machine (a parallel
suite on two cores took over 12 s)."""


@pytest.mark.slow
def test_a_killed_driver_is_re_attached_and_an_abandoned_run_ends_by_its_lease(tmp_path):
    run_id = f"reattach-{uuid.uuid4().hex[:8]}"
    run_dir = tmp_path / "run"
    args = ("--address", "", "--resume", "auto", "--set", "selfplay.workers=1",
            "--set", f"distributed.lease_s={LEASE_S}", "--set", "learner.checkpoint_every_s=10")
    with RayHead(cpus=2) as head:
        head.wait_up()
        args = tuple(head.address if a == "" else a for a in args)

        # 1. a run, then its driver killed: the actors outlive it
        with TrainProcess(run_dir, run_id, *args) as first:
            first.wait_for("steps ")
            before = first.status_when(lambda s: s["learner_steps"] >= 20, timeout=120)
            assert before["learner_steps"] >= 20, before
            os.kill(first.proc.pid, signal.SIGKILL)
            first.proc.wait(timeout=10)
            first_killed_at = time.monotonic()
        survivors = head.actor_processes(run_id)
        assert len(survivors) >= 2, f"no live actors after the driver died:\n{head.log()}"

        # 2. the same command re-attaches: the learner goes on (not restarted)
        with TrainProcess(run_dir, run_id, *args) as second:
            second.wait_for("re-attached: adopted ")
            # the figure docs/reliability.md gives (driver start included)
            print(f"re-attached {time.monotonic() - first_killed_at:.1f} s after the kill")
            line = next(x for x in second.lines if "re-attached" in x)
            assert f"adopted {len(survivors)} live actors" in line, line
            assert "controller state saved" in line, line  # the floors came back too
            first_look = second.status()
            for key in ("games", "games_received", "learner_steps", "weights_version"):
                assert first_look[key] >= before[key], (key, before, first_look)
            after = second.status_when(
                lambda s: s["learner_steps"] > before["learner_steps"] + 20, timeout=120)
            assert after["learner_steps"] > before["learner_steps"] + 20, after
            assert after["restarts"].get("learner", 0) == 0, after  # adopted, not replaced
            assert after["games"] >= before["games"], (before, after)
            os.kill(second.proc.pid, signal.SIGKILL)
            second.proc.wait(timeout=10)
            killed_at = time.monotonic()
            last_steps = after["learner_steps"]

        # 3. nobody re-attaches: every actor ends itself once its lease runs out
        while head.actor_processes(run_id) and time.monotonic() - killed_at < LEASE_S + 60:
            time.sleep(0.5)
        ended_after = time.monotonic() - killed_at
        print(f"actors ended {ended_after:.1f} s after the driver (lease {LEASE_S} s)")
        assert head.actor_processes(run_id) == [], f"actors outlived their lease:\n{head.log()}"
        assert ended_after >= LEASE_S - 2, ended_after  # not before the lease ran out

        # 4. the same command once more: nothing to re-attach to, the learner resumes
        # from the checkpoint it wrote as its lease ran out
        with TrainProcess(run_dir, run_id, *args) as third:
            third.wait_for("steps ")
            assert not any("re-attached" in x for x in third.lines), third.output
            resumed = third.status_when(lambda s: s["learner_steps"] > 0, timeout=120)
            assert resumed["learner_steps"] >= last_steps, (last_steps, resumed)
            r = zf("stop", "--run-dir", str(run_dir))
            assert r.returncode == 0, r.stderr
            assert third.wait(timeout=150) == 0, third.output[-3000:]
        assert head.actor_processes(run_id) == [], "a stopped run left actors running"
