"""Proof of learning against pure MCTS: train from random weights, then play the yardstick.

    # gomoku 6x6 k=4: 30 minutes, then 100 games (alternating colours) at <= 400 simulations
    # a move against pure MCTS with 1,000 random-rollout playouts a move
    python benchmarks/learn_vs_uct.py --config gomoku6 --minutes 30 --games 100
    # five-stone chess
    python benchmarks/learn_vs_uct.py --config fivestone --minutes 30 --games 100
    # learning curve of an existing run (no training): the untrained net, every weight
    # snapshot and the final checkpoint, each against every anchor; rows also as JSON
    python benchmarks/learn_vs_uct.py --config gomoku8 --curve runs/gomoku8 --games 50 \
        --anchor uct:1000 --anchor uctsolver:1000 --json runs/gomoku8/curve.json
    python benchmarks/plot_curve.py runs/gomoku8/curve.json --out docs/img/curve.svg
    # each snapshot against the final net (openings sampled for variety)
    python benchmarks/learn_vs_uct.py --config gomoku8 --curve runs/gomoku8 --games 50 \
        --anchor net:runs/gomoku8/checkpoint.pt --no-final

Prints the match table (draws count half) and, for --curve, score over wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch
from machine import machine_line  # benchmarks/machine.py (scripts run from here)

from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.local_run import LocalRun
from zeroforge.learner.learner import CHECKPOINT_NAME
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import TorchEvaluator, build_net
from zeroforge.shared.players import MCTSPlayer, make_player, play_match, random_openings
from zeroforge.shared.players import load_net as load_trained_net
from zeroforge.shared.run_files import snapshot_files

OPENING_MOVES = 2
"""Plies both sides sample by visit counts when the opponent is another net (``net:PATH``):
two deterministic searchers would otherwise replay the same two games."""


def match_table(game, evaluator, config, sims: int, anchor: str, games: int, seed: int,
                opening_moves: int | None = None, paired_openings: int | None = None):
    """Play the agent (``sims`` simulations, no noise) against ``anchor``, a ``make_player``
    spec: a fixed opponent or ``net:PATH``, the net of a snapshot or checkpoint at the same
    simulations. ``opening_moves``: plies each searcher samples by visit counts before it
    plays its most visited move (None: ``OPENING_MOVES`` against a net, 0 otherwise).
    ``paired_openings``: plies of uniformly random moves that each pair of games begins
    with, colours swapped (``play_match``'s ``openings``), the same ones for every point
    of a curve (drawn from ``seed``). Returns the match result and the seconds it took."""
    search = dataclasses.replace(config.search, num_simulations=sims)
    opening = opening_moves if opening_moves is not None else (
        OPENING_MOVES if anchor.startswith("net:") else 0)
    opponent = make_player(anchor, game, search=search, net_config=config.net,
                           opening_moves=opening)
    agent = MCTSPlayer(game, evaluator, search, name=f"agent{sims}", opening_moves=opening)
    openings = random_openings(game, (games + 1) // 2, paired_openings,
                               np.random.default_rng([seed, 1])) if paired_openings else None
    start = time.monotonic()
    result = play_match(game, agent, opponent, games, np.random.default_rng(seed), openings)
    return result, time.monotonic() - start


def curve_points(run_dir: Path, run_minutes: float, raw: bool = False
                 ) -> list[tuple[float, str, Path | None]]:
    """(minutes of training, label, weights file) for the untrained net (None), each
    weight snapshot and the run's final checkpoint (at ``run_minutes``); with ``raw``, the
    raw snapshots (``snapshots/raw/``) of a run that averaged apart from self-play."""
    points: list[tuple[float, str, Path | None]] = [(0.0, "0 min (untrained)", None)]
    for seconds, snap in snapshot_files(run_dir, raw):
        minutes = seconds / 60
        points.append((minutes, f"{minutes:.0f} min", snap))
    final = run_dir / CHECKPOINT_NAME
    if final.exists():
        points.append((run_minutes, f"{run_minutes:.0f} min (final)", final))
    return points


def nearest_points(points: list[tuple[float, str, Path | None]], minutes: list[float]
                   ) -> list[tuple[float, str, Path | None]]:
    """Of ``points`` (from ``curve_points``), for each of ``minutes`` the one nearest it,
    within half a minute, in their order: a snapshot written a few seconds after the
    budget (150.1 min) and the final checkpoint (150) are both near 150, and only the
    final is meant; at equal distance the later point in ``points`` (the final) wins."""
    chosen = set()
    for m in minutes:
        near = [(abs(p[0] - m), -i) for i, p in enumerate(points) if abs(p[0] - m) < 0.5]
        if near:
            chosen.add(-min(near)[1])
    return [p for i, p in enumerate(points) if i in chosen]


def load_net(game, config, path: Path | None, seed: int, raw: bool = False
             ) -> torch.nn.Module:
    """The net of a snapshot or checkpoint (with ``raw``, a checkpoint's raw weights);
    freshly initialised (seeded) for None."""
    torch.manual_seed(seed)
    if path is None:
        return build_net(config.net, game.spec)
    return load_trained_net(path, game, config.net, raw=raw)


def earlier_rows(path: str | None, header: dict, prog: str = "learn_vs_uct") -> list[dict]:
    """Rows of an earlier ``--json`` file measured the same way (every ``header`` field
    equal), so an interrupted or growing table goes on where it stopped; [] if none.
    ``prog`` names the script in its one-line errors."""
    if not path or not Path(path).exists():
        return []
    try:
        old = json.loads(Path(path).read_text())
    except ValueError as err:
        raise SystemExit(f"{prog}: {path}: not JSON ({err}); "
                         "move it away to start over") from None
    measured = {k: old.get(k) for k in header}
    if measured != header:
        raise SystemExit(f"{prog}: {path} was measured differently ({measured}); "
                         "move it away to start over")
    return list(old["rows"])


def curve(game, config, run_dir: Path, anchors: list[str], args) -> None:
    """Score of every point of ``curve_points`` against every anchor: a Markdown table on
    stdout (a row as soon as it is measured) and, with ``--json``, the rows in a file
    (points already in that file are not played again)."""
    if args.raw and not snapshot_files(run_dir, raw=True):
        # a run that has not reached its first snapshot is judged again later, not refused
        why = ("the run did not keep its average apart from self-play"
               if snapshot_files(run_dir) else "no snapshot written yet (snapshots/)")
        raise SystemExit(f"learn_vs_uct: {run_dir}: no raw snapshots (snapshots/raw/): {why}")
    points = curve_points(run_dir, config.run.minutes, args.raw)
    if not args.final:
        points = [p for p in points if p[2] is None or p[2].name != CHECKPOINT_NAME]
    if not args.untrained:
        points = [p for p in points if p[2] is not None]
    if args.only is not None:  # an expensive anchor at a few points of the curve
        points = nearest_points(points, args.only)
    header = {"game": config.game, "agent_simulations": args.sims, "games": args.games,
              "anchors": anchors, "weights": "raw" if args.raw else None,
              "opening_moves": args.opening_moves, "paired_openings": args.paired_openings}
    # weights None: the snapshots themselves, left out of the file as before --raw was
    # there, so a file of either kind goes on only with its own kind; the same for
    # opening_moves None (the default plies, as before --opening-moves), paired_openings
    # None (none, as before --paired-openings)
    rows = earlier_rows(args.json, header)
    done = {row["label"] for row in rows}
    print(f"{len(points)} points ({len(done & {p[1] for p in points})} measured before) x "
          f"{len(anchors)} anchors, {args.games} games each, agent {args.sims} simulations")
    print("| training wall clock | " + " | ".join(f"vs `{a}` (+/=/-)" for a in anchors)
          + " |\n|---:|" + "---:|" * len(anchors))
    for minutes, label, path in points:
        if label in done:
            continue
        try:
            evaluator = TorchEvaluator(load_net(game, config, path, args.seed, args.raw))
        except ValueError as err:  # a corrupt file, or a checkpoint without raw weights
            raise SystemExit(f"learn_vs_uct: {err}") from None
        # the host too: a run judged here was trained here, and the host changes its pace
        cells, row = [], {"minutes": minutes, "label": label,
                          "weights": str(path) if path else None, "machine": machine_line(),
                          "results": {}}
        for anchor in anchors:
            result, took = match_table(game, evaluator, config, args.sims, anchor, args.games,
                                       args.seed, args.opening_moves, args.paired_openings)
            e = result.elo()
            cells.append(f"{result.score:.0%} (+{result.wins} ={result.draws} -{result.losses})")
            row["results"][anchor] = {**result.counts(),
                                      # a 0% or 100% score has an unbounded Elo: null
                                      **{k: (v if np.isfinite(v) else None) for k, v in
                                         {"elo": e.elo, "elo_low": e.low,
                                          "elo_high": e.high}.items()},
                                      "seconds": took}
        rows.append(row)
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
        if args.json:
            rows.sort(key=lambda r: r["minutes"])
            written = {k: v for k, v in header.items() if v is not None}
            Path(args.json).write_text(json.dumps({**written, "rows": rows}, indent=1,
                                                  allow_nan=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="preset name or config file")
    parser.add_argument("--minutes", type=float, default=None, help="training budget")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--sims", type=int, default=400, help="agent simulations a move")
    parser.add_argument("--anchor", dest="anchors", action="append", default=None,
                        help="opponent (repeatable with --curve): random, uct:N, uctsolver:N, "
                        "or net:PATH (a snapshot or checkpoint); default uct:1000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--curve", default=None, help="evaluate RUN_DIR/snapshots instead")
    parser.add_argument("--json", default=None,
                        help="with --curve: also write the rows here (and skip those in it)")
    parser.add_argument("--no-final", dest="final", action="store_false",
                        help="with --curve: leave out RUN_DIR/checkpoint.pt (run still going)")
    parser.add_argument("--no-untrained", dest="untrained", action="store_false",
                        help="with --curve: leave out the untrained net (a run that started "
                        "from a pre-trained net has it as its 0-minute snapshot instead)")
    parser.add_argument("--raw", action="store_true",
                        help="with --curve: the raw weights (snapshots/raw/ and the "
                        "checkpoint's raw_model) of a run that averaged apart from self-play")
    parser.add_argument("--only", type=float, nargs="+", default=None, metavar="MINUTES",
                        help="with --curve: only the point nearest each of these minutes of "
                        "training (within half a minute)")
    parser.add_argument("--opening-moves", type=int, default=None, metavar="PLIES",
                        help=f"plies each searcher samples by visit counts before playing its "
                        f"most visited move: variety against an engine that would otherwise "
                        f"meet the same replies (default: {OPENING_MOVES} against net:PATH, "
                        f"0 otherwise)")
    parser.add_argument("--paired-openings", type=int, default=None, metavar="PLIES",
                        help="each pair of games begins with PLIES uniformly random moves, "
                        "once with each colour (the same openings at every point): "
                        "distinct games against an engine that repeats its replies, with "
                        "no worse moves from either player than its own")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    for flag in ("opening_moves", "paired_openings"):
        if getattr(args, flag) is not None and getattr(args, flag) < 0:
            parser.error(f"--{flag.replace('_', '-')} must be 0 or more, "
                         f"got {getattr(args, flag)}")
    torch.set_num_threads(1)
    print(machine_line())
    overrides = list(args.overrides) + [f"run.seed={args.seed}"]
    if args.minutes is not None:
        overrides.append(f"run.minutes={args.minutes}")
    if args.run_dir:
        overrides.append(f"run.run_dir={args.run_dir}")
    config = load_train_config(args.config, overrides)
    game = make_game(config.game)

    anchors = args.anchors or ["uct:1000"]
    if args.curve:
        curve(game, config, Path(args.curve), anchors, args)
        return

    start = time.monotonic()
    run = LocalRun(config)
    progress = run.run()
    trained = time.monotonic() - start
    result, took = match_table(game, run.evaluator, config, args.sims, anchors[0], args.games,
                               args.seed + 1, args.opening_moves, args.paired_openings)
    print()
    print("| item | value |\n|---|---|")
    print(f"| game | {config.game} |\n| training wall clock | {trained / 60:.1f} min |")
    print(f"| self-play games / positions | {progress.games:.0f} / {progress.positions:.0f} |")
    print(f"| learner steps | {progress.learner_steps:.0f} |")
    print(f"| agent | {args.sims} simulations a move, no noise, most-visited move |")
    print(f"| opponent | {anchors[0]} |")
    print(f"| result ({result.num_games} games, colours alternating) | +{result.wins} "
          f"={result.draws} -{result.losses}, score {result.score:.1%} |")
    e = result.elo()
    print(f"| Elo difference | {e.elo:+.0f} [{e.low:+.0f}, {e.high:+.0f}] |")
    print(f"| evaluation time | {took / 60:.1f} min |")


if __name__ == "__main__":
    main()
