"""Batched search throughput on gomoku 6x6 (k=4) with the uniform evaluator.

Plays a few self-play moves for each batch size (B games in lock-step, every finished game
replaced by a new one) and prints simulations/s, positions/s (searched positions, i.e.
moves chosen), microseconds per simulated leaf, and how the time splits between the tree
kernels, the rules (state gather, ``game.step``, store) and the evaluator (observation,
call and checks). With a trivial evaluator this measures the search's own overhead.

    python benchmarks/bench_search.py            # 400 simulations, 8 moves per batch size
    python benchmarks/bench_search.py --quick    # 2 moves per batch size
    python benchmarks/bench_search.py --gumbel   # Gumbel AlphaZero instead of PUCT
    python benchmarks/bench_search.py --forced-k 2   # PUCT with KataGo's forced playouts
    python benchmarks/bench_search.py --leaf-batch 8 --batches 1   # one game, 8 leaves a call
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from zeroforge.shared.games import make_game
from zeroforge.shared.search import MCTS, SearchConfig, UniformEvaluator


def measure(spec: str, batch: int, config: SearchConfig, moves: int, seed: int) -> dict:
    game = make_game(spec)
    mcts = MCTS(game, UniformEvaluator(), config)
    rngs = [np.random.default_rng(seed + i) for i in range(batch)]
    states = game.init(batch)
    for key in mcts.timings:
        mcts.timings[key] = 0.0
    start = time.perf_counter()
    for _ in range(moves):
        result = mcts.search(states, rngs)
        mcts.advance(result.action)
        states = game.step(states, result.action)
        over = np.flatnonzero(states.terminal)
        if over.size:
            states.put(over, game.init(over.size))
            mcts.reset(over)
    total = time.perf_counter() - start
    leaves = batch * moves * config.num_simulations
    split = dict(mcts.timings)
    split["other"] = total - sum(split.values())
    return {"sims_per_s": leaves / total, "positions_per_s": batch * moves / total,
            "us_per_leaf": 1e6 * total / leaves, "split": {k: v / total for k, v in split.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 moves per batch size")
    parser.add_argument("--game", default="gomoku6")
    parser.add_argument("--simulations", type=int, default=400)
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 16, 64, 256])
    parser.add_argument("--gumbel", action="store_true", help="Gumbel AlphaZero root")
    parser.add_argument("--reuse", action="store_true", help="keep the subtree between moves")
    parser.add_argument("--forced-k", type=float, default=0.0,
                        help="forced playouts' k (PUCT, with policy-target pruning); 0: off. "
                        "The uniform evaluator spreads visits so evenly that hardly any are "
                        "forced: this measures the feature's bookkeeping")
    parser.add_argument("--leaf-batch", type=int, default=1,
                        help="leaves per tree and evaluator call, kept apart by virtual loss "
                        "(PUCT); 1: the lock-step search")
    args = parser.parse_args()
    moves = 2 if args.quick else 8
    config = SearchConfig(num_simulations=args.simulations, gumbel=args.gumbel,
                          reuse_tree=args.reuse, forced_playouts_k=args.forced_k,
                          leaf_batch=args.leaf_batch)
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cores, python {platform.python_version()}")
    forced = f", forced playouts k={args.forced_k}" if args.forced_k else ""
    forced += f", leaf_batch {args.leaf_batch}" if args.leaf_batch > 1 else ""
    print(f"{args.game}, {'Gumbel' if args.gumbel else 'PUCT'}{forced}, "
          f"{args.simulations} simulations, "
          f"{moves} moves per batch size, uniform evaluator")
    measure(args.game, 2, SearchConfig(num_simulations=8, gumbel=args.gumbel,
                                       leaf_batch=args.leaf_batch), 1, 0)  # compile
    cols = ["tree", "step", "evaluate", "rollout", "other"]
    print("| batch | simulations/s | positions/s | µs/leaf | "
          + " | ".join(f"{c} %" for c in cols) + " |")
    print("|---:|---:|---:|---:|" + "---:|" * len(cols))
    for batch in args.batches:
        r = measure(args.game, batch, config, moves, seed=batch)
        shares = " | ".join(f"{100 * r['split'][c]:.0f}" for c in cols)
        print(f"| {batch} | {r['sims_per_s']:,.0f} | {r['positions_per_s']:,.1f} | "
              f"{r['us_per_leaf']:.1f} | {shares} |", flush=True)


if __name__ == "__main__":
    main()
