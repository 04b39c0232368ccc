"""Random-play throughput of every game's rules, batched and one game at a time.

Counts moves of running games per second; each move includes the legal-mask update and the
terminal check (both happen inside ``step``) and drawing a random legal action. Prints a
markdown table of medians over repeats.

    python benchmarks/bench_games.py            # all games, batch 1 and 1024
    python benchmarks/bench_games.py --quick    # fewer repeats
    python benchmarks/bench_games.py --clock process   # CPU time: steadier on a busy machine
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from zeroforge.shared.games import make_game, sample_legal

GAMES = ["tictactoe", "gomoku6", "gomoku15", "go9", "go:size=9,ko=simple", "go19",
         "5stone_chess"]


CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
"""``process`` counts only this process's CPU time: on a machine shared with other work
the wall clock also counts the time other processes held the cores."""


def moves_per_second(spec: str, batch: int, min_moves: int, seed: int,
                     clock: str = "wall") -> float:
    game = make_game(spec)
    rng = np.random.default_rng(seed)
    now = CLOCKS[clock]
    moves, elapsed = 0, 0.0
    while moves < min_moves:
        state = game.init(batch)
        start = now()
        while True:
            running = int((~game.terminal(state)).sum())
            if running == 0:
                break
            state = game.step(state, sample_legal(game.legal_mask(state), rng))
            moves += running
        elapsed += now() - start
    return moves / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--games", nargs="*", default=GAMES)
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 256, 1024])
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="time measured: wall clock or this process's CPU time")
    args = parser.parse_args()
    repeats = 3 if args.quick else 5
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"clock {args.clock}, load average {os.getloadavg()[0]:.1f}")
    print("| game | " + " | ".join(f"batch {b}" for b in args.batches) + " |")
    print("|---|" + "---:|" * len(args.batches))
    for spec in args.games:
        moves_per_second(spec, 8, 1, 0)  # compile the numba kernels outside the timing
        cells = []
        for batch in args.batches:
            budget = 20_000 if batch == 1 else 200_000
            runs = [moves_per_second(spec, batch, budget, seed, args.clock)
                    for seed in range(repeats)]
            cells.append(f"{statistics.median(runs):,.0f}")
        print(f"| {spec} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
