"""The single-process training loop: batched self-play -> learner -> new weights -> self-play.

Built from the same parts as the distributed run (SelfPlayWorker, Learner, TorchEvaluator,
evaluation players), just called in turn in one process.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
import yaml

from actors.evaluation import MCTSPlayer, evaluate_against
from actors.selfplay import SelfPlayWorker
from deploy.config import TrainConfig
from learner.learner import CHECKPOINT_NAME, Learner
from shared import config as cfg
from shared.formats.weights import save_weights
from shared.games import make_game
from shared.nets import build_net
from shared.torch_evaluator import TorchEvaluator


@dataclass
class Progress:
    """What the progress line and the final summary report."""

    elapsed: float = 0.0
    games: int = 0
    positions: int = 0
    steps: int = 0
    version: int = 0
    losses: dict[str, float] = field(default_factory=dict)
    win_rates: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        pos_s = self.positions / max(self.elapsed, 1e-9)
        loss = (f"loss {self.losses['loss']:.3f} (p {self.losses['policy_loss']:.3f} "
                f"v {self.losses['value_loss']:.3f})" if self.losses else "loss -")
        wins = " ".join(f"{k} {v:.0%}" for k, v in self.win_rates.items()) or "-"
        return (f"[{self.elapsed:7.1f}s] games {self.games} | positions/s {pos_s:.0f} | "
                f"steps {self.steps} | {loss} | weights v{self.version} | score vs {wins}")


class LocalRun:
    """One training run in this process; ``run()`` until a limit, with checkpoints."""

    def __init__(self, config: TrainConfig, resume: bool = False, out: TextIO | None = None
                 ) -> None:
        self.config = config
        self.out = out or sys.stdout
        self.run_dir = Path(config.run.run_dir)
        if config.run.torch_threads:
            torch.set_num_threads(config.run.torch_threads)
        self.game = make_game(config.game)
        self.learner = Learner(config.learner, self.game.spec.spec_string, config.net)
        self.checkpoint_path = self.run_dir / CHECKPOINT_NAME
        if resume:
            self.learner.restore(self.checkpoint_path)
            self._say(f"resumed from {self.checkpoint_path}: step {self.learner.steps}, "
                      f"{self.learner.games_seen} games, weights v{self.learner.version}")
        self.evaluator = TorchEvaluator(build_net(config.net, self.game.spec))
        self.evaluator.load_state_dict(self.learner.weights(), self.learner.version)
        seed = config.run.seed + 1000 * self.learner.steps  # a resumed run plays new games
        self.worker = SelfPlayWorker(self.game, self.evaluator, config.search, config.selfplay,
                                     seed=seed, worker_id="local")
        self.rng = np.random.default_rng(seed + 1)
        self.progress = Progress(games=self.learner.games_seen, steps=self.learner.steps,
                                 version=self.learner.version)
        self.history: list[dict] = []

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _write_config(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(self.config)))

    def _done(self, start: float) -> bool:
        r = self.config.run
        return bool((r.minutes and time.monotonic() - start >= r.minutes * 60)
                    or (r.max_learner_steps and self.learner.steps >= r.max_learner_steps)
                    or (r.max_games and self.learner.games_seen >= r.max_games))

    def evaluate(self) -> dict[str, float]:
        """Score (draws half) of the current weights against each anchor."""
        r = self.config.run
        search = self.config.search
        if r.eval_simulations:
            search = dataclasses.replace(search, num_simulations=r.eval_simulations)
        agent = MCTSPlayer(self.game, self.evaluator, search)
        results = evaluate_against(self.game, agent, r.eval_anchors, r.eval_games, self.rng)
        return {k: v.score for k, v in results.items()}

    def run(self) -> Progress:
        r = self.config.run
        self._write_config()
        start = last_ckpt = last_eval = last_line = last_snap = time.monotonic()
        positions0 = 0
        steps_at_publish = self.learner.steps
        while not self._done(start):
            games = self.worker.play_moves(r.moves_per_round)
            self.learner.add(games)
            metrics = self.learner.train_available(r.train_steps_per_round)
            if metrics:
                self.progress.losses = metrics[-1]
            if self.learner.steps - steps_at_publish >= r.publish_every_steps:
                steps_at_publish = self.learner.steps
                self.evaluator.load_state_dict(self.learner.weights(), self.learner.publish())
            now = time.monotonic()
            self.progress.elapsed = now - start
            self.progress.games = self.learner.games_seen
            self.progress.positions = self.worker.stats.positions - positions0
            self.progress.steps = self.learner.steps
            self.progress.version = self.learner.version
            if r.eval_every_s and now - last_eval >= r.eval_every_s:
                self.progress.win_rates = self.evaluate()
                self._log_eval()
                last_eval = time.monotonic()
            if r.snapshot_every_s and now - last_snap >= r.snapshot_every_s:
                self._snapshot(now - start)
                last_snap = now
            if now - last_ckpt >= r.checkpoint_every_s:
                self.learner.save(self.checkpoint_path)
                last_ckpt = now
            if now - last_line >= r.progress_every_s:
                self._say(self.progress.line())
                last_line = now
        self.evaluator.load_state_dict(self.learner.weights(), self.learner.publish())
        self.learner.save(self.checkpoint_path)
        self.progress.win_rates = self.evaluate()
        self.progress.elapsed = time.monotonic() - start
        self._log_eval()
        self._say(self.progress.line())
        self._say(f"checkpoint: {self.checkpoint_path}")
        return self.progress

    def _snapshot(self, elapsed: float) -> None:
        folder = self.run_dir / "snapshots"
        folder.mkdir(parents=True, exist_ok=True)
        save_weights(self.learner.weights(), folder / f"weights-{elapsed:06.0f}s.pt")

    def _log_eval(self) -> None:
        entry = {"elapsed_s": round(self.progress.elapsed, 1), "steps": self.learner.steps,
                 "games": self.learner.games_seen, "version": self.learner.version,
                 "score": self.progress.win_rates}
        self.history.append(entry)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / "eval.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
