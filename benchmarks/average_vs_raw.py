"""A run's averaged weights against its own raw weights, from its final checkpoint.

With ``learner.average_horizon`` a checkpoint holds both: ``model``, the average (what the
evaluator judged, what ``play`` loads) and ``raw_model``, the weights as trained. This plays
one against the other, the way ``time_to_strength.py`` judges (the preset's search as
PUCT, ``--sims`` simulations each, colours alternating, the first two moves by visit
counts so the games differ), and prints one row per run; ``--json`` keeps them::

    python benchmarks/average_vs_raw.py --config go9 --games 40 \\
        --run runs/go9-seed100:100 --run runs/go9-seed101:101 --json rows.json

``--run DIR:SEED``: the run directory and its seed (the match's seed). A checkpoint
without ``raw_model`` (a run that did not average) is refused in one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from learn_vs_uct import match_table
from time_to_strength import agent_config

from zeroforge.learner.learner import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from zeroforge.shared.config import from_dict
from zeroforge.shared.formats import save_weights
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="the runs' preset or config file")
    p.add_argument("--run", dest="runs", action="append", required=True, metavar="DIR:SEED")
    p.add_argument("--games", type=int, default=40)
    p.add_argument("--sims", type=int, default=400, help="simulations a move, each side")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   help="the runs' own overrides (the net must load)")
    p.add_argument("--json", help="rows also here")
    args = p.parse_args(argv)
    args.eval_overrides = []
    return args


def run_and_seed(text: str) -> tuple[Path, int]:
    folder, _, seed = text.rpartition(":")
    if not folder or not seed.isdigit():
        raise SystemExit(f"average_vs_raw: --run {text!r}: expected DIR:SEED")
    return Path(folder), int(seed)


def play(args: argparse.Namespace, run_dir: Path, seed: int) -> dict:
    """The averaged model against the raw one of ``run_dir``'s checkpoint: one row."""
    path = run_dir / CHECKPOINT_NAME
    try:
        blob = load_checkpoint(path)
    except CheckpointError as err:
        raise SystemExit(f"average_vs_raw: {err}") from None
    if "raw_model" not in blob:
        raise SystemExit(f"average_vs_raw: {path}: no raw_model (the run did not average: "
                         "learner.average_horizon was 0)")
    judged = agent_config(args.config, args)
    game = make_game(judged.game)
    net_config = from_dict(NetConfig, blob["net_config"], f"{path}: net")
    raw_file = run_dir / "final-raw.safetensors"  # the opponent is a player spec: a file
    save_weights(blob["raw_model"], raw_file)
    torch.manual_seed(seed)
    average = build_net(net_config, game.spec)
    average.load_state_dict(blob["model"])
    match, seconds = match_table(game, TorchEvaluator(average.eval()), judged, args.sims,
                                 f"net:{raw_file}", args.games, seed)
    counters = blob["counters"]
    return {"run_dir": str(run_dir), "seed": seed, "steps": int(counters["steps"]),
            "averaged_steps": int(counters.get("averaged_steps", 0)),
            **match.counts(), "games": args.games, "seconds": round(seconds, 1)}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    runs = [run_and_seed(r) for r in args.runs]
    print("| run | seed | steps | average vs raw |\n|---|---:|---:|---|")
    rows = []
    for run_dir, seed in runs:
        row = play(args, run_dir, seed)
        rows.append(row)
        print(f"| {run_dir.name} | {seed} | {row['steps']} | {row['score']:.0%} "
              f"(+{row['wins']} ={row['draws']} -{row['losses']}) |", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(
                {"config": args.config, "overrides": args.overrides, "sims": args.sims,
                 "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
