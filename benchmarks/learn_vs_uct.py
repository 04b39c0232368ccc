"""Proof of learning against pure MCTS: train from random weights, then play the yardstick.

    # gomoku 6x6 k=4: 30 minutes, then 100 games (alternating colours) at <= 400 simulations
    # a move against pure MCTS with 1,000 random-rollout playouts a move
    python benchmarks/learn_vs_uct.py --config gomoku6 --minutes 30 --games 100
    # five-stone chess
    python benchmarks/learn_vs_uct.py --config fivestone --minutes 30 --games 100
    # learning curve of an existing run's snapshots (no training)
    python benchmarks/learn_vs_uct.py --config gomoku8 --curve runs/gomoku8 --games 50

Prints the match table (draws count half) and, for --curve, win rate over wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from actors.evaluation import MCTSPlayer, make_anchor
from deploy.config import load_train_config
from deploy.local_run import LocalRun
from shared.arena import play_match
from shared.games import make_game
from shared.nets import build_net, load_weights
from shared.torch_evaluator import TorchEvaluator


def match_table(game, evaluator, config, sims: int, anchor: str, games: int, seed: int):
    search = dataclasses.replace(config.search, num_simulations=sims)
    agent = MCTSPlayer(game, evaluator, search, name=f"agent{sims}")
    start = time.monotonic()
    result = play_match(game, agent, make_anchor(anchor), games, np.random.default_rng(seed))
    return result, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="preset name or config file")
    parser.add_argument("--minutes", type=float, default=None, help="training budget")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--sims", type=int, default=400, help="agent simulations a move")
    parser.add_argument("--anchor", default="uct:1000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--curve", default=None, help="evaluate RUN_DIR/snapshots instead")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch threads 1")
    overrides = list(args.overrides) + [f"run.seed={args.seed}"]
    if args.minutes is not None:
        overrides.append(f"run.minutes={args.minutes}")
    if args.run_dir:
        overrides.append(f"run.run_dir={args.run_dir}")
    config = load_train_config(args.config, overrides)
    game = make_game(config.game)

    if args.curve:
        snaps = sorted((Path(args.curve) / "snapshots").glob("weights-*s.pt"))
        print("| training wall clock | score vs " + args.anchor + " | +/=/- |\n|---:|---:|---|")
        for snap in snaps:
            net = build_net(config.net, game.spec)
            load_weights(snap, net)
            result, _ = match_table(game, TorchEvaluator(net), config, args.sims, args.anchor,
                                    args.games, args.seed)
            minutes = int(snap.stem.split("-")[1].rstrip("s")) / 60
            print(f"| {minutes:.0f} min | {result.score:.0%} | +{result.wins} ={result.draws} "
                  f"-{result.losses} |", flush=True)
        return

    start = time.monotonic()
    run = LocalRun(config)
    progress = run.run()
    trained = time.monotonic() - start
    result, took = match_table(game, run.evaluator, config, args.sims, args.anchor, args.games,
                               args.seed + 1)
    print()
    print("| item | value |\n|---|---|")
    print(f"| game | {config.game} |\n| training wall clock | {trained / 60:.1f} min |")
    print(f"| self-play games / positions | {progress.games} / {run.worker.stats.positions} |")
    print(f"| learner steps | {progress.steps} |")
    print(f"| agent | {args.sims} simulations a move, no noise, most-visited move |")
    print(f"| opponent | {args.anchor} |")
    print(f"| result ({result.num_games} games, colours alternating) | +{result.wins} "
          f"={result.draws} -{result.losses}, score {result.score:.1%} |")
    e = result.elo()
    print(f"| Elo difference | {e.elo:+.0f} [{e.low:+.0f}, {e.high:+.0f}] |")
    print(f"| evaluation time | {took / 60:.1f} min |")


if __name__ == "__main__":
    main()
