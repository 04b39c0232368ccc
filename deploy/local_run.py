"""The local run: the distributed run's services, stepped in turn in one process.

``zeroforge train --local`` builds the same self-play worker, learner and evaluator as a
distributed run (``deploy/builder.py``) over the in-memory transport, so every game is
encoded and decoded as on the wire, the learner's publish / checkpoint / snapshot timing
and the run's limits are the learner service's own, evaluations go through the evaluator
service into the same run record, and the same metrics are served on a Prometheus
endpoint. Only the scheduling differs: one thread takes turns instead of processes
running side by side.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from deploy.builder import build_evaluator, build_learner, build_selfplay
from shared import config as cfg
from shared import metrics
from shared.run_record import RunRecord
from shared.status import RunStatus
from shared.train_config import TrainConfig
from shared.transport.memory import MemoryTransport

LEARNER_READ = 1024
"""Most games the learner takes from the stream per turn: all a turn's self-play made."""


class LocalRun:
    """One training run in this process; ``run()`` until a limit, with checkpoints."""

    def __init__(self, config: TrainConfig, resume: bool = False, out: TextIO | None = None,
                 serve_metrics: bool = True) -> None:
        self.config = config
        self.out = out or sys.stdout
        self.run_id = config.run.run_id or "local"
        self.record = RunRecord(config.run.run_dir)
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
        self.evaluation = build_evaluator(config, self.ctx, self.transport, record=self.record)
        self._started = time.monotonic()
        self._metrics = metrics.MetricsEndpoint(self._merged, config.run.metrics_host,
                                                config.run.metrics_port) if serve_metrics else None

    @property
    def evaluator(self):
        """The self-play worker's network evaluator (the newest weights it fetched)."""
        return self.worker.evaluator

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _merged(self) -> dict:
        return metrics.merge([self.worker.stats(), self.learner.stats(),
                              self.evaluation.stats()])

    def status(self, state: str = "running") -> RunStatus:
        return RunStatus.from_metrics(
            self._merged(), run_id=self.run_id, state=state,
            elapsed_s=round(time.monotonic() - self._started, 1), inference="local",
            metrics_url=self._metrics.url if self._metrics else "")

    def run(self) -> RunStatus:
        """Self-play, learn, evaluate in turn until a limit of the run; then the final
        publish, checkpoint and evaluation. Returns the final status."""
        self.record.write_config(cfg.to_dict(self.config))
        if self._metrics:
            self._say(f"run {self.run_id} (local): metrics at {self._metrics.url}")
        moves = self.config.selfplay.moves_per_round
        start = last_line = time.monotonic()
        interrupted = False
        try:
            try:
                while not self.learner.limit_reached(start):
                    self.worker.run_once(moves)
                    self.learner.run_once(max_read=LEARNER_READ, block_ms=0)
                    if self.evaluation.due():
                        self.evaluation.run_once()
                    if time.monotonic() - last_line >= self.config.run.progress_every_s:
                        self._say(self.status().progress_line())
                        last_line = time.monotonic()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop as at a limit
                interrupted = True
                self._say("stopping (final checkpoint)...")
            self.learner.drain()
            self.learner.stop()  # final publish, checkpoint, acks
            if not interrupted:
                self.worker.refresh_weights()
                self.evaluation.run_once()
            final = self.status("stopped")
            self._say(final.progress_line())
            self._say(f"checkpoint: {self.learner.checkpoint_path}")
            return final
        finally:
            if self._metrics:
                self._metrics.close()
