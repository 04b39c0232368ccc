"""Pure-UCT throughput (gomoku 6x6 k=4 unless ``--game``) and the time of a 100-game
UCT-1000 match.

    python benchmarks/bench_uct.py            # playouts/s table + projected match time
    python benchmarks/bench_uct.py --full     # also play the whole 100-game match
    python benchmarks/bench_uct.py --game go9 --batches 1 20 --no-match   # Go's playouts
    python benchmarks/bench_uct.py --game gomoku6 --playouts 10000 --batches 1 15 \
        --compare 3 --json docs/data/uct-gomoku6-playouts.json   # compiled against stepped

``--compare R``: R rounds, each timing every batch with the rollouts stepped a ply at a time
through ``Game.step`` ("before": what a game without a compiled playout does, the game's
``random_playout`` switched off) and then with the game's compiled playout ("after"), so
the two are interleaved on the same machine state; the rows go to ``--json``.

Playouts/s counts playouts summed over the batch (B trees x playouts per tree). The match
projection plays the first plies of the real 100-game match (every game is still running
there, so they are the most expensive plies) and multiplies the mean time per ply by the
mean game length of a smaller UCT-1000 self-play match.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from zeroforge.shared.games import Game, State, make_game, sample_legal
from zeroforge.shared.players import Player, make_player, play_match
from zeroforge.shared.search import UCTConfig, uct_search


def playouts_per_second(game: Game, roots: State, config: UCTConfig, repeats: int = 1) -> float:
    rng = np.random.default_rng(0)
    uct_search(game, roots.take(np.arange(min(2, roots.batch_size))),
               UCTConfig(playouts=20, solver=config.solver, store_states=config.store_states),
               rng)  # compile / warm up
    start = time.perf_counter()
    for _ in range(repeats):
        uct_search(game, roots, config, rng)
    return repeats * roots.batch_size * config.playouts / (time.perf_counter() - start)


def stepped(game: Game) -> Game:
    """``game`` with its compiled random playout switched off: rollouts then step the batch
    a ply at a time (``search.rollout.rollout_outcomes``), as for a game without one."""
    game.random_playout = lambda states, rng: None  # type: ignore[method-assign]
    return game


def compare(spec: str, playouts: list[int], batches: list[int], rounds: int) -> list[dict]:
    """Rows {round, variant, playouts, batch, playouts_per_s}: stepped ("before") and
    compiled ("after") playouts, interleaved round by round, from the empty board."""
    rows = []
    for round_ in range(1, rounds + 1):
        for variant in ("before", "after"):
            game = make_game(spec) if variant == "after" else stepped(make_game(spec))
            for n in playouts:
                for batch in batches:
                    rate = playouts_per_second(game, game.init(batch), UCTConfig(playouts=n))
                    rows.append({"round": round_, "variant": variant, "playouts": n,
                                 "batch": batch, "playouts_per_s": round(rate)})
                    print(f"round {round_} {variant:<6} {n:>6} playouts, batch {batch:>4}: "
                          f"{rate:>9,.0f} playouts/s ({batch * n / rate:.2f} s a move)",
                          flush=True)
    return rows


def midgame(game: Game, batch: int, plies: int, rng: np.random.Generator) -> State:
    """Random positions ``plies`` moves in that are still running."""
    states = game.init(batch * 4)
    for _ in range(plies):
        states = game.step(states, sample_legal(game.legal_mask(states), rng))
    running = np.flatnonzero(~states.terminal)[:batch]
    return states.take(running)


def first_plies(game: Game, players: tuple[Player, Player], num_games: int, plies: int,
                rng: np.random.Generator) -> list[float]:
    """Seconds per ply for the first ``plies`` plies of a match laid out like ``play_match``."""
    states = game.init(num_games)
    a_color = np.arange(num_games) % 2
    times = []
    for _ in range(plies):
        start = time.perf_counter()
        actions = np.full(num_games, -1, np.int64)
        running = ~states.terminal
        a_moves = running & (states.to_play == a_color)
        for player, mask in ((players[0], a_moves), (players[1], running & ~a_moves)):
            idx = np.flatnonzero(mask)
            if idx.size:
                actions[idx] = player.select(game, states.take(idx), rng)
        states = game.step(states, actions)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--playouts", type=int, nargs="+", default=[1000],
                        help="playouts a move (several only with --compare)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--plies", type=int, default=3, help="plies timed for the projection")
    parser.add_argument("--length-games", type=int, default=16,
                        help="games of the match that measures the mean game length")
    parser.add_argument("--full", action="store_true", help="also play the whole match")
    parser.add_argument("--game", default="gomoku6", help="a game spec")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64, 100],
                        help="roots searched together")
    parser.add_argument("--no-match", dest="match", action="store_false",
                        help="the playouts/s table only")
    parser.add_argument("--compare", type=int, metavar="ROUNDS", default=0,
                        help="stepped against compiled rollouts, interleaved, this many rounds")
    parser.add_argument("--json", help="with --compare: write the rows here")
    args = parser.parse_args()
    game = make_game(args.game)
    rng = np.random.default_rng(0)
    if args.compare:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from benchmarks.machine import machine_line
        from benchmarks.record import print_and_keep

        machine = machine_line()
        print(machine)
        rows = compare(args.game, args.playouts, args.batches, args.compare)
        print_and_keep({"game": game.spec.spec_string, "machine": machine,
                        "command": " ".join(["python benchmarks/bench_uct.py", *sys.argv[1:]]),
                        "rows": rows}, args.json)
        return
    if len(args.playouts) > 1:
        raise SystemExit("bench_uct: several --playouts only with --compare")
    playouts = args.playouts[0]
    cfg = UCTConfig(playouts=playouts)

    print(f"{game.spec.spec_string}, {playouts} playouts per move, from the empty board")
    print(f"{'batch':>6} {'playouts/s':>11} {'s per move (batch)':>19}")
    for batch in args.batches:
        rate = playouts_per_second(game, game.init(batch), cfg, repeats=3 if batch == 1 else 1)
        print(f"{batch:>6} {rate:>11,.0f} {batch * playouts / rate:>19.2f}")
    if not args.match:
        return

    print("\nvariants at batch 64, 8 random moves in (deeper trees)")
    roots = midgame(game, 64, 8, rng)
    for label, variant in [
        ("stored node states, solver", cfg),
        ("replayed paths, solver", UCTConfig(playouts=playouts, store_states=False)),
        ("stored node states, no solver", UCTConfig(playouts=playouts, solver=False)),
    ]:
        print(f"  {label:<32} {playouts_per_second(game, roots, variant):>9,.0f} playouts/s")

    spec = f"uctsolver:{playouts}"  # cfg: the default UCTConfig, solver on
    players = (make_player(spec, game, name="uct_a"), make_player(spec, game, name="uct_b"))
    start = time.perf_counter()
    sample = play_match(game, *players, args.length_games, rng)
    length_s = time.perf_counter() - start
    mean_len = float(np.mean([len(m) for m in sample.moves]))
    print(f"\nUCT-{playouts} self-play, {args.length_games} games: mean length "
          f"{mean_len:.1f} plies (max {game.spec.max_moves}), {length_s:.1f} s; "
          f"{sample.summary()}")
    times = first_plies(game, players, args.games, args.plies, rng)
    per_ply = float(np.mean(times))
    print(f"{args.games}-game match, first {args.plies} plies: "
          + ", ".join(f"{t:.2f}" for t in times) + " s per ply")
    print(f"projected {args.games}-game UCT-{playouts} vs UCT-{playouts} match: "
          f"{per_ply * mean_len / 60:.1f} min (mean length), "
          f"at most {per_ply * game.spec.max_moves / 60:.1f} min (every game to a full board)")

    if args.full:
        start = time.perf_counter()
        result = play_match(game, *players, args.games, rng)
        print(f"full match: {(time.perf_counter() - start) / 60:.1f} min; {result.summary()}; "
              f"mean length {np.mean([len(m) for m in result.moves]):.1f}")


if __name__ == "__main__":
    main()
