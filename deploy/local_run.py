"""The local run: the distributed run's services, stepped in turn in one process.

``zeroforge train --local`` builds the same self-play worker, learner and evaluator as a
distributed run (``deploy/runtime/builder.py``) over the in-memory transport, so every game is
encoded and decoded as on the wire, the learner's publish / checkpoint / snapshot timing
and the run's limits are the learner service's own, evaluations go through the evaluator
service into the same run record, and the same metrics are served on a Prometheus
endpoint. Only the scheduling differs: one thread takes turns instead of processes
running side by side.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.runtime.builder import build_learner, build_rating_service, build_selfplay
from zeroforge.deploy.runtime.node_stats import ResourceReporter
from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.shared import config as cfg
from zeroforge.shared import metrics
from zeroforge.shared.run_files import RunFiles
from zeroforge.shared.transport import MemoryTransport

LOCAL_KINDS = ("selfplay", "learner", "evaluator")
"""The local run's services, one of each (its ``RunStatus.actors`` rows)."""

LEARNER_READ = 1024
"""Most games the learner takes from the stream per turn: all a turn's self-play made."""


class LocalRun:
    """One training run in this process; ``run()`` until a limit, with checkpoints."""

    def __init__(self, config: TrainConfig, resume: bool = False, out: TextIO | None = None,
                 serve_metrics: bool = True, serve_dashboard: bool | None = None) -> None:
        if config.selfplay.simulate_from:
            raise ValueError("selfplay.simulate_from simulates the workers of a distributed "
                             "run (benchmarks/scale_sim.py); a local run plays its games")
        self.config = config
        self.out = out or sys.stdout
        self.run_id = config.run.run_id or "local"
        self.record = RunFiles(config.run.run_dir)
        self.transport = MemoryTransport(self.run_id)
        self.ctx = config.context(self.run_id, "memory://")
        self.learner = build_learner(config, self.ctx, self.transport, resume)
        if resume and self.learner.learner.steps:
            ln = self.learner
            self._say(f"resumed from {ln.checkpoint_path}: step {ln.learner.steps}, "
                      f"{ln.games_received} games, weights v{ln.learner.version}")
        # a resumed run plays new games: the worker's seed depends on the steps so far
        self.worker = build_selfplay(config, self.ctx, self.transport, 0,
                                     salt=self.learner.learner.steps)
        self.evaluation = build_rating_service(config, self.ctx, self.transport, record=self.record)
        self._started = time.monotonic()
        self._resources = ResourceReporter("local", "0", socket.gethostname())
        self._recorder = metrics.Recorder()
        self._own: list[dict] | None = None
        self._own_at = 0.0
        self._own_lock = threading.Lock()
        self._metrics = metrics.MetricsEndpoint(self._merged, config.run.metrics_host,
                                                config.run.metrics_port) if serve_metrics else None
        # the dashboard and `zeroforge status` (docs/metrics.md, "Dashboard"); by default
        # wherever the metrics endpoint is served
        self._serve_dashboard = serve_metrics if serve_dashboard is None else serve_dashboard
        self.dashboard: Any = None
        self._entry: Any = None

    @property
    def evaluator(self):
        """The self-play worker's network evaluator (the newest weights it fetched)."""
        return self.worker.evaluator

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _merged(self) -> dict:
        return metrics.merge([self.worker.stats(), self.learner.stats(),
                              self.evaluation.stats(), *self._own_stats()])

    def _own_stats(self) -> list[dict]:
        """The process's and machine's CPU/memory (as a Ray actor host reports them) and
        the actor gauges a controller would keep, refreshed at most once a second: the
        endpoint, the history and status all ask, and the CPU share is per interval."""
        with self._own_lock:
            if self._own is None or time.monotonic() - self._own_at >= 1.0:
                alive = 0 if self._state == "stopped" else 1
                for kind in LOCAL_KINDS:
                    self._recorder.set("actors_desired", 1, kind=kind)
                    self._recorder.set("actors_alive", alive, kind=kind)
                self._own = [self._resources.snapshot(), self._recorder.snapshot()]
                self._own_at = time.monotonic()
            return self._own

    def status(self, state: str | None = None) -> RunStatus:
        merged = self._merged()
        return RunStatus.from_metrics(
            merged, run_id=self.run_id, state=state or self._state,
            stopped_by=self._stopped_by,
            elapsed_s=round(time.monotonic() - self._started, 1), inference="local",
            desired=dict.fromkeys(LOCAL_KINDS, 1), alive=dict.fromkeys(LOCAL_KINDS, 1),
            actor_states={k: {"alive": 1} for k in LOCAL_KINDS},
            metrics_url=self._metrics.url if self._metrics else "",
            actors=self._actor_rows(merged))

    _state = "running"
    _stopped_by = ""
    """What ended the run (``RunStatus.stopped_by``): ``limit``, ``interrupt``, ``failure``."""

    def _actor_rows(self, merged: dict) -> list[dict]:
        """The local run's three services as ``RunStatus.actors`` rows (one process)."""
        v, pid, node = metrics.value, os.getpid(), socket.gethostname()

        def total(name: str) -> float:  # over the series' labels (worker, worker_kind)
            return float(sum(merged["values"].get(name, {}).values()))

        games, positions = total("selfplay_games_total"), total("selfplay_positions_total")
        row = {"index": 0, "state": "alive", "node": node, "pid": pid, "games": 0.0,
               "positions": 0.0, "steps": 0.0, "evaluations": 0.0}
        return [row | {"kind": "selfplay", "games": games, "positions": positions,
                       "evaluations": total("nn_evaluations_total")},
                row | {"kind": "learner", "steps": v(merged, "learner_steps_total")},
                row | {"kind": "evaluator"}]

    def _start_dashboard(self) -> None:
        from zeroforge.deploy.dashboard.run import LEGEND, RunDashboard
        from zeroforge.deploy.runtime import run_registry

        run = self.config.run
        self.dashboard = RunDashboard(run, self.run_id, run.run_dir, self.status,
                                      self._merged)
        self._entry = run_registry.RunEntry(
            run_id=self.run_id, address="", token_path="",
            metrics_url=self._metrics.url if self._metrics else "", driver_pid=os.getpid(),
            run_dir=str(Path(run.run_dir).resolve()), started=self.dashboard.history.started,
            dashboard_url=self.dashboard.url,
            dashboard_token_path=self.dashboard.token_path)
        run_registry.register(self._entry)
        self._say(f"run {self.run_id} (local): {self.dashboard.announce()}; "
                  "`zeroforge status` from another terminal")
        self._say(LEGEND)

    def _stop_dashboard(self) -> None:
        from zeroforge.deploy.runtime import run_registry

        if self._entry is not None:
            run_registry.unregister(self._entry)
        if self.dashboard is not None:
            self.dashboard.close()

    def _final_evaluation(self) -> None:
        """Rate the final weights. It can take minutes (a big board, many simulations)
        after the checkpoint is on disk, so the log says what runs, and Ctrl-C skips it
        without losing anything."""
        ev = self.config.evaluation
        saved = "" if self.learner.checkpoint_health.error else "the checkpoint is written; "
        self._say(f"final evaluation: {ev.games} games a match against "
                  f"{', '.join(ev.anchors)} ({saved}Ctrl-C skips this)")
        try:
            self.evaluation.run_once()
        except KeyboardInterrupt:
            self._say("final evaluation skipped")

    def run(self) -> RunStatus:
        """Self-play, learn, evaluate in turn until a limit of the run; then the final
        publish, checkpoint and evaluation. Returns the final status."""
        self.record.write_config(cfg.to_dict(self.config))
        if self._metrics:
            self._say(f"run {self.run_id} (local): metrics at {self._metrics.url}")
        if self._serve_dashboard:
            self._start_dashboard()
        moves = self.config.selfplay.moves_per_round
        start = last_line = time.monotonic()
        interrupted = False
        try:
            try:
                while not self.learner.limit_reached(start):
                    self.worker.run_once(moves)
                    self.learner.run_once(max_read=LEARNER_READ, block_ms=0)
                    if self.learner.checkpoint_health.failures:
                        # a full or read-only run directory: the distributed learner
                        # trains on, but here nothing is acked without a checkpoint and
                        # the one thread would wait at the stream's backlog limit for
                        # good, so the run stops, keeping its last good checkpoint
                        interrupted, self._stopped_by = True, "failure"
                        self._say("stopping: a local run cannot go on without writing "
                                  "its checkpoint (its stream is in memory)")
                        break
                    if self.evaluation.due():
                        self.evaluation.run_once()
                    if time.monotonic() - last_line >= self.config.run.progress_every_s:
                        self._say(self.status().progress_line())
                        last_line = time.monotonic()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop as at a limit
                interrupted, self._stopped_by = True, "interrupt"
                self._state = "stopping"
                self._say("stopping (final checkpoint)...")
            self._stopped_by = self._stopped_by or "limit"
            self.learner.drain()
            self.learner.stop()  # final publish, checkpoint, acks
            if not interrupted:
                self.worker.refresh_weights()
                self._final_evaluation()
            self._state = "stopped"
            final = self.status()
            self._say(final.progress_line())
            failed = self.learner.checkpoint_health.error
            if failed:
                # a full or read-only run directory: the last good checkpoint stays, but
                # the games received since lived in this process's stream only
                unsaved = self.learner.status()["unacked"]
                return dataclasses.replace(final, error=(
                    f"the final checkpoint was not written ({failed}); the last good one "
                    f"stays, without the {unsaved} games received since (a local run's "
                    f"stream is in memory)"))
            self._say(f"checkpoint: {self.learner.checkpoint_path}")
            return final
        finally:
            self._stop_dashboard()
            if self._metrics:
                self._metrics.close()
