"""One game's search with leaf batching (``SearchConfig.leaf_batch``): speed and strength.

A game searched alone sends its evaluator one leaf per call in the lock-step search; with
leaf batching one tree sends up to ``leaf_batch`` leaves per call (virtual loss keeps the
descents of a round apart). This measures, for one game at a time on a network evaluator
(CPU, one torch thread; the net's weights do not matter for speed):

- simulations/s of a search from a fixed set of openings, per leaf_batch, the settings
  alternated (the order reversed every repeat) so that a change in the machine's load
  hits them alike; the median over repeats is printed, with the evaluator calls per
  search and the share of time in the evaluator;
- with ``--games N``: a match at equal time, leaf_batch L against 1: each side gets the
  simulations its measured speed fits in ``--move-ms`` (the Agent's rule for timed
  moves), colours alternating, games opened by two random plies. Meaningful with a
  trained ``--checkpoint`` (an untrained net's values are noise, which more search does
  not turn into strength). Small match, wide error bars: the score is printed with its
  standard error.

    python benchmarks/bench_leaf_batch.py                          # gomoku6, tiny net
    python benchmarks/bench_leaf_batch.py --net small --games 20 --move-ms 100
    python benchmarks/bench_leaf_batch.py --checkpoint RUN/checkpoint.pt --games 20
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from zeroforge.shared.games import Game, State, make_game
from zeroforge.shared.nets import InferenceConfig, TorchEvaluator, build_net
from zeroforge.shared.search import MCTS, Evaluation, SearchConfig


class Counting:
    """Counts an evaluator's calls and positions."""

    def __init__(self, inner: TorchEvaluator) -> None:
        self.inner, self.calls, self.positions = inner, 0, 0

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        self.calls += 1
        self.positions += legal.shape[0]
        return self.inner.evaluate(obs, legal)


def openings(game: Game, count: int, plies: int, seed: int) -> list[State]:
    """``count`` running positions reached by ``plies`` uniformly random moves."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        s = game.init(1)
        for _ in range(plies):
            s = game.step(s, [rng.choice(np.flatnonzero(s.legal[0]))])
        if not s.terminal[0]:
            out.append(s)
    return out


def config(sims: int, leaf_batch: int) -> SearchConfig:
    """The engines' search: no noise, the most visited move."""
    return SearchConfig(num_simulations=sims, add_noise=False, temperature_moves=0,
                        leaf_batch=leaf_batch)


def speed(game: Game, evaluator: Counting, positions: list[State], sims: int,
          leaf_batch: int) -> tuple[float, float, float]:
    """(simulations/s, evaluator calls per search, evaluator share of the time)."""
    evaluator.calls = 0
    evaluate = 0.0
    start = time.perf_counter()
    for i, state in enumerate(positions):
        mcts = MCTS(game, evaluator, config(sims, leaf_batch))
        mcts.search(state, np.random.default_rng(i))
        evaluate += mcts.timings["evaluate"]
    took = time.perf_counter() - start
    return sims * len(positions) / took, evaluator.calls / len(positions), evaluate / took


def match(game: Game, evaluator: Counting, sims: dict[int, int], challenger: int,
          games: int, seed: int) -> tuple[int, int, int, int]:
    """(wins, draws, losses) of leaf_batch ``challenger`` against 1 over ``games`` games,
    and the games the first mover won (all of them: the colour decided, not the search)."""
    wins = draws = losses = first_won = 0
    starts = openings(game, (games + 1) // 2, 2, seed)
    for g in range(games):
        state = starts[g // 2]
        challenger_moves_first = g % 2 == 0  # the same opening with both colours
        first_mover = int(state.to_play[0])
        while not state.terminal[0]:
            mover_is_first = int(state.to_play[0]) == first_mover
            batch = challenger if mover_is_first == challenger_moves_first else 1
            mcts = MCTS(game, evaluator, config(sims[batch], batch))
            action = mcts.search(state, np.random.default_rng(g)).action
            state = game.step(state, action)
        outcome = int(game.outcome(state)[0])  # +1: the player to move first (player 0) won
        first_won += outcome == (1 if first_mover == 0 else -1)
        challenger_player = first_mover if challenger_moves_first else 1 - first_mover
        score = outcome if challenger_player == 0 else -outcome
        wins += score > 0
        draws += score == 0
        losses += score < 0
    return wins, draws, losses, first_won


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="gomoku6")
    parser.add_argument("--net", default="tiny", help="net preset (untrained weights)")
    parser.add_argument("--checkpoint", default=None, metavar="PATH",
                        help="a learner checkpoint instead: its game and trained net")
    parser.add_argument("--simulations", type=int, default=400)
    parser.add_argument("--leaf-batches", nargs="*", type=int, default=[1, 8, 16])
    parser.add_argument("--positions", type=int, default=4, help="searches per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--games", type=int, default=0, help="match games per leaf_batch > 1")
    parser.add_argument("--move-ms", type=float, default=100.0, help="time a move, in the match")
    parser.add_argument("--match-simulations", type=int, default=None, metavar="N",
                        help="both sides search N simulations a move instead (what a "
                        "simulation is worth, not a move's time)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.checkpoint:
        from zeroforge.deploy.engines.agent import checkpoint_game
        from zeroforge.shared.players import load_net

        args.game = checkpoint_game(args.checkpoint) or args.game
        args.net = f"trained ({args.checkpoint})"
        game = make_game(args.game)
        net = load_net(args.checkpoint, game)
    else:
        game = make_game(args.game)
        net = build_net(args.net, game.spec)
    evaluator = Counting(TorchEvaluator(net, config=InferenceConfig(device="cpu",
                                                                    num_threads=1)))
    positions = openings(game, args.positions, 4, args.seed)
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"python {platform.python_version()}, torch threads 1")
    print(f"{args.game}, {args.net} net on CPU, one game, {args.simulations} simulations, "
          f"{args.positions} positions x {args.repeats} repeats (median)")
    for batch in args.leaf_batches:  # compile the kernels, warm the net
        speed(game, evaluator, positions[:1], 32, batch)
    runs: dict[int, list[tuple[float, float, float]]] = {b: [] for b in args.leaf_batches}
    for r in range(args.repeats):
        order = args.leaf_batches if r % 2 == 0 else args.leaf_batches[::-1]
        for batch in order:
            runs[batch].append(speed(game, evaluator, positions, args.simulations, batch))
    print("| leaf_batch | simulations/s | vs 1 | evaluator calls / search | evaluator % |")
    print("|---:|---:|---:|---:|---:|")
    rate = {}
    for batch in args.leaf_batches:
        rate[batch] = statistics.median(x[0] for x in runs[batch])
        calls = statistics.median(x[1] for x in runs[batch])
        share = statistics.median(x[2] for x in runs[batch])
        base = rate.get(1, rate[batch])
        print(f"| {batch} | {rate[batch]:,.0f} | {rate[batch] / base:.2f}x | {calls:.0f} | "
              f"{100 * share:.0f} |", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if args.games and 1 in rate:
        if args.match_simulations:
            sims = {b: args.match_simulations for b in rate}
            print(f"\nmatch at equal simulations, {args.match_simulations} a move, "
                  f"{args.games} games each")
        else:
            sims = {b: max(1, int(rate[b] * args.move_ms / 1000)) for b in rate}
            print(f"\nmatch at equal time, {args.move_ms:.0f} ms a move "
                  f"(simulations a move: {sims}), {args.games} games each")
        print("| leaf_batch vs 1 | wins | draws | losses | score | ± s.e. | first mover won |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for batch in args.leaf_batches:
            if batch == 1:
                continue
            w, d, l, first = match(game, evaluator, sims, batch, args.games, args.seed + batch)
            points = np.array([1.0] * w + [0.5] * d + [0.0] * l)
            se = points.std(ddof=1) / np.sqrt(len(points)) if len(points) > 1 else float("nan")
            print(f"| {batch} | {w} | {d} | {l} | {points.mean():.2f} | {se:.2f} | {first} |",
                  flush=True)
        print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
