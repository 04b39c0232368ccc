"""Supervised pre-training from game records (AlphaGo's "SL policy" step).

Every position of every SGF record becomes a sample: the observation, the move actually
played as a one-hot policy target, and the final result as the value target. The network
trains on them with the same Learner (so the checkpoint it writes is one that
``zeroforge train --resume`` continues from), and reports held-out move-prediction
accuracy and value error.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np
import torch

from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.learner.replay import ReplayWindow
from zeroforge.shared.formats import GameRecord, SgfDirStats, iter_sgf_dir, replay
from zeroforge.shared.games import Game, IllegalMoveError, make_game
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.run_context import RunContext
from zeroforge.shared.samples import GameSamples

log = logging.getLogger(__name__)


@dataclass
class PretrainReport:
    """What a pre-training run did."""

    games_used: int = 0
    games_skipped: int = 0
    """Records without a known result, for another board, or with an illegal move."""
    positions: int = 0
    steps: int = 0
    holdout_positions: int = 0
    holdout_accuracy: float = 0.0
    """Share of held-out positions whose played move is the net's top legal move."""
    holdout_value_mse: float = 0.0
    seconds: float = 0.0


def samples_from_record(game: Game, record: GameRecord) -> GameSamples:
    """The (s, pi, z) samples of one record; raises ValueError/IllegalMoveError if unusable."""
    if record.result is None:
        raise ValueError("the record has no known result")
    session = replay(record, game)  # validates every move through the rules
    states = [*session.history, session.state][: len(record.moves)]
    obs = np.concatenate([game.observe(s) for s in states])
    policy = np.zeros((len(record.moves), game.spec.num_actions), np.float32)
    policy[np.arange(len(record.moves)), record.moves] = 1.0
    to_play = np.array([int(s.to_play[0]) for s in states], np.int8)
    return GameSamples(game.spec.spec_string, game.spec.version, obs, policy, to_play,
                       outcome=int(record.result), game_id=f"sgf-{id(record)}")


def load_records(game: Game, sgf_dir: str | Path, limit: int = 0
                 ) -> tuple[list[GameSamples], int, SgfDirStats]:
    """Samples of every usable record under ``sgf_dir`` (bad ones are skipped and counted)."""
    stats = SgfDirStats()
    games: list[GameSamples] = []
    skipped = 0
    for record in iter_sgf_dir(sgf_dir, stats=stats):
        try:
            games.append(samples_from_record(game, record))
        except (ValueError, IllegalMoveError) as err:
            skipped += 1
            log.warning("skipping an SGF game: %s", str(err).splitlines()[0])
        if limit and len(games) >= limit:
            break
    # files that would not parse and malformed games inside readable ones count too
    return games, skipped + stats.skipped_files + stats.skipped_games, stats


def evaluate_holdout(learner: Learner, games: list[GameSamples]) -> tuple[float, float, int]:
    """(top-1 move accuracy over legal moves, value MSE, positions) on held-out games."""
    if not games:
        return 0.0, 0.0, 0
    obs = np.concatenate([g.obs for g in games])
    target = np.concatenate([g.policy for g in games]).argmax(axis=1)
    z = np.concatenate([g.value_targets() for g in games])
    learner.net.eval()
    with torch.inference_mode():
        x = torch.from_numpy(obs).to(learner.device, torch.float32)
        logits, v = learner.net(x)
    predicted = logits.cpu().numpy().argmax(axis=1)
    accuracy = float((predicted == target).mean())
    mse = float(((v.cpu().numpy() - z) ** 2).mean())
    return accuracy, mse, int(obs.shape[0])


def pretrain(ctx: RunContext, net: NetConfig, config: LearnerConfig, sgf_dir: str | Path,
             steps: int, holdout: float = 0.1, limit: int = 0,
             out: TextIO | None = None) -> PretrainReport:
    """Train ``steps`` SGD steps on the records of ``ctx.game``, save
    ``ctx.run_dir/checkpoint.pt`` (the run's ``TrainConfig.context()``, ``net`` and
    ``learner`` sections)."""
    out = out or sys.stdout
    start = time.monotonic()
    game = make_game(ctx.game)
    games, skipped, stats = load_records(game, sgf_dir, limit)
    if not games:
        raise ValueError(f"{sgf_dir}: no usable {game.spec.name} records "
                         f"({stats.files} files, {skipped} games skipped)")
    rng = np.random.default_rng(ctx.seed)
    order = rng.permutation(len(games))
    n_hold = int(round(len(games) * holdout)) if len(games) > 1 else 0
    held = [games[i] for i in order[:n_hold]]
    train = [games[i] for i in order[n_hold:]]
    positions = sum(g.num_positions for g in train)
    lcfg = dataclasses.replace(config, samples_per_insert=0.0, min_replay=1,
                               replay_capacity=max(positions, 1))
    learner = Learner(lcfg, game.spec.spec_string, net)
    learner.add(train)
    print(f"pretrain: {len(train)} games ({positions} positions) to train on, {len(held)} "
          f"held out, {skipped} skipped", file=out, flush=True)
    for i in range(steps):
        m = learner.step()
        if (i + 1) % max(steps // 10, 1) == 0 or i + 1 == steps:
            acc, mse, _ = evaluate_holdout(learner, held)
            print(f"step {i + 1}/{steps}: loss {m['loss']:.3f} (p {m['policy_loss']:.3f} "
                  f"v {m['value_loss']:.3f}) | held-out move accuracy {acc:.1%}, value mse "
                  f"{mse:.3f}", file=out, flush=True)
    learner.publish()
    acc, mse, n = evaluate_holdout(learner, held)
    # The self-play run that resumes this checkpoint starts its own window. Kept, the
    # records would count as inserted positions and owe that run samples-per-insert
    # budget: its learner would first train on them for minutes while its self-play
    # waited (seen on Go 9x9: ~15 minutes). They stay in their SGF files.
    learner.replay = ReplayWindow(1, game.spec.obs_shape, game.spec.num_actions)
    learner.samples_trained = 0
    path = learner.save(Path(ctx.run_dir) / "checkpoint.pt")
    print(f"checkpoint: {path}", file=out, flush=True)
    return PretrainReport(len(train) + len(held), skipped, positions, steps, n, acc, mse,
                          time.monotonic() - start)
