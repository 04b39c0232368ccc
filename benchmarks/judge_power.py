"""What a judged curve can tell apart: how often a run *holds* a target and ends near its
best point, by chance alone, when each point is a match of a given number of effective
games.

Issue 44's go9 goal reads a run's curve against GnuGo (a point every 15 minutes, 40 games
each) two ways: the target is *held* (``tts_rule.held_minutes``: the median of three
consecutive points reaches it) and the final checkpoint ends within 10 points of the best
point. A 40-game point against GnuGo is 10-15 effective games (the agent plays its most
visited move and GnuGo repeats its replies: docs/lab/go9.md, "How many games is a 40-game
point?"). This simulates curves whose true level is known: it rises linearly from
``--start`` over the first points and then stays at a plateau for the last
``--plateau-points``; each judged point scores Binomial(n, level) / n with n the effective
games (rounded). So a run that truly plays at 45% can be seen to "hold" 50%, and a final
checkpoint as strong as any point can be seen to end far below the best one (the best of
ten noisy points overstates the true level).

    python benchmarks/judge_power.py --effective 12 40 120 --plateaus 0.4 0.45 0.5 0.55 0.6 \\
        --json docs/data/judge-power.json

Independent seeds multiply: "held on 3 seeds of 3" is P(held) cubed. The model is kinder
than the real judge: repeated lines are not binomial games, and the true level of a real
run moves between points.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np
from tts_rule import held_minutes  # benchmarks/ (scripts run from here)

MINUTES_APART = 15.0
"""Minutes between judged points (the go9 recipe's ``learner.snapshot_every_s=900``)."""


def true_levels(start: float, plateau: float, points: int, plateau_points: int) -> np.ndarray:
    """The true score at each of ``points`` points, shape (points,): a linear rise from
    ``start`` over the first ``points - plateau_points``, then ``plateau``."""
    if not 0 < plateau_points <= points:
        raise ValueError(f"plateau points must be in 1..{points}, got {plateau_points}")
    rise = np.linspace(start, plateau, points - plateau_points + 1)[:-1]
    return np.concatenate([rise, np.full(plateau_points, plateau)])


def simulate(levels: np.ndarray, effective: float, trials: int, rng: np.random.Generator,
             target: float = 0.5, hold: int = 3, within: float = 0.10) -> dict[str, float]:
    """``trials`` judged curves of true ``levels`` (shape (points,)), each point a match
    of ``effective`` games: the share that hold ``target`` (median of ``hold`` in a row),
    the share whose final point is within ``within`` of their best point, and the median
    of the best point's excess over the highest true level."""
    n = max(round(effective), 1)
    scores = rng.binomial(n, levels, size=(trials, len(levels))) / n  # (trials, points)
    minutes = [MINUTES_APART * (i + 1) for i in range(len(levels))]
    held = sum(held_minutes([{"minutes": m, "score": s} for m, s in zip(minutes, row, strict=True)],
                            target, hold) is not None for row in scores.tolist())
    best = scores.max(axis=1)
    return {"held": held / trials,
            "final_within": float(np.mean(scores[:, -1] >= best - within - 1e-9)),
            "best_above_true": float(statistics.median((best - levels.max()).tolist()))}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--effective", type=float, nargs="+", default=[12.0, 40.0, 120.0],
                   help="effective games a point (a 40-game point against GnuGo: 10-15)")
    p.add_argument("--plateaus", type=float, nargs="+",
                   default=[0.40, 0.45, 0.50, 0.55, 0.60],
                   help="true scores of the curve's last points")
    p.add_argument("--points", type=int, default=10, help="judged points a run (150 min)")
    p.add_argument("--plateau-points", type=int, default=4,
                   help="last points at the plateau (the rest rise to it from --start)")
    p.add_argument("--start", type=float, default=0.10, help="true score of the first point")
    p.add_argument("--target", type=float, default=0.5)
    p.add_argument("--hold", type=int, default=3, help="points whose median is the level")
    p.add_argument("--within", type=float, default=0.10,
                   help="how far below the best point the final may end")
    p.add_argument("--seeds-needed", type=int, default=3,
                   help="runs that must each hold (independent: P(held) to this power)")
    p.add_argument("--trials", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the rows (and the settings) here")
    args = p.parse_args(argv)
    for name in ("effective", "plateaus"):
        bad = [x for x in getattr(args, name) if not
               (x >= 1 if name == "effective" else 0 <= x <= 1)]
        if bad:
            p.error(f"--{name}: {bad[0]:g} is out of range")
    if args.trials < 1:
        p.error("--trials must be at least 1")
    return args


def header(settings: dict) -> tuple[str, ...]:
    """The table's columns for a run of this script with ``settings`` (its JSON's keys)."""
    return ("effective games a point", f"true level, last {settings['plateau_points']} points",
            f"holds {settings['target']:.0%}",
            f"holds on {settings['seeds_needed']} runs of {settings['seeds_needed']}",
            f"final within {settings['within'] * 100:.0f} of the best",
            "best point above the true level (median)")


def cells(row: dict) -> list[str]:
    """One row of the table (``row``: one of the JSON's rows)."""
    return [f"{row['effective']:g}", f"{row['plateau']:.0%}", f"{row['held']:.0%}",
            f"{row['held_all']:.0%}", f"{row['final_within']:.0%}",
            f"{row['best_above_true'] * 100:+.0f}"]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    settings = {"points": args.points, "plateau_points": args.plateau_points,
                "start": args.start, "minutes_apart": MINUTES_APART, "target": args.target,
                "hold": args.hold, "within": args.within, "seeds_needed": args.seeds_needed,
                "trials": args.trials, "seed": args.seed}
    columns = header(settings)
    print("| " + " | ".join(columns) + " |\n|" + "---:|" * len(columns))
    rows = []
    for effective in args.effective:
        for plateau in args.plateaus:
            levels = true_levels(args.start, plateau, args.points, args.plateau_points)
            got = simulate(levels, effective, args.trials, rng, args.target, args.hold,
                           args.within)
            rows.append({"effective": effective, "plateau": plateau, **got,
                         "held_all": got["held"] ** args.seeds_needed})
            print("| " + " | ".join(cells(rows[-1])) + " |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({**settings, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
