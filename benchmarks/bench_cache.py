"""Evaluation cache: self-play positions/s and hit rates with and without it, interleaved.

For each game preset (``deploy/configs/<game>.yaml``: its net, search and B) these setups
run side by side in one process, all on one ``TorchEvaluator`` (same weights):

- **base**: ``SelfPlayWorker`` on the network directly (today's default);
- **cache**: the same worker behind a ``CachedEvaluator`` of ``--entries`` positions
  (``selfplay.eval_cache_entries``): duplicates within a leaf batch, transpositions in a
  tree, the played move's subtree searched again at the next move, the B games' openings;
- **shared x2**: two workers (other seeds) behind ONE cache, as an inference server with
  ``inference.cache_entries`` serves them: adds the hits across workers; its positions/s
  counts both workers' moves over both workers' time (it is what one core gets);
- with ``--reuse``: **reuse** and **reuse+cache**, the same with ``search.reuse_tree`` on
  (a kept subtree is not evaluated again, so it takes away part of the cache's hits).

Setups take turns: each round every setup plays ``--moves`` moves of all its B games on
its own worker(s), which keep their games (and caches) between rounds, so all see the same
load drift; the order rotates by round. The table gives positions/s (moves played summed
over the batch, totals over the rounds), the median over rounds of its ratio to the base of
the same round, the hit rate (positions answered without the network / positions asked,
over the measured rounds) and network evaluations per position. The ``--warmup`` moves of
every worker (numba, oneDNN primitives, a first cache fill) are not measured: all B games
start from the same empty board, so the first moves repeat far more positions (46% hits on
gomoku 6x6's second move) than games spread over all stages do.

The network has random weights: a trained net's trees are narrower, so its searches repeat
more positions and the hit rates here are a lower bound on that count.

    python benchmarks/bench_cache.py                              # gomoku6, gomoku8, go9
    python benchmarks/bench_cache.py --games gomoku6 --rounds 5 --moves 4 --reuse

Torch runs on one thread (``torch.set_num_threads(1)``), on the CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import torch
from machine import machine_line  # benchmarks/machine.py (scripts run from here)

from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.deploy.config import load_train_config
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import TorchEvaluator, build_net, num_parameters
from zeroforge.shared.search import CachedEvaluator


@dataclasses.dataclass
class Setup:
    """One row of the table: its workers, their cache (if any) and what they did."""

    name: str
    workers: list[SelfPlayWorker]
    cache: CachedEvaluator | None
    positions: int = 0
    seconds: float = 0.0
    lookups: int = 0
    hits: int = 0
    evaluated: int = 0
    ratios: list[float] = dataclasses.field(default_factory=list)

    def play(self, moves: int) -> float:
        """Play ``moves`` moves on every worker; returns positions/s of this turn."""
        before = sum(w.stats.positions for w in self.workers)
        stats = self.cache.stats if self.cache is not None else None
        cached = (stats.lookups, stats.hits, stats.evaluated) if stats is not None else None
        start = time.perf_counter()
        for w in self.workers:
            w.play_moves(moves)
        seconds = time.perf_counter() - start
        done = sum(w.stats.positions for w in self.workers) - before
        self.positions += done
        self.seconds += seconds
        if stats is not None and cached is not None:
            self.lookups += stats.lookups - cached[0]
            self.hits += stats.hits - cached[1]
            self.evaluated += stats.evaluated - cached[2]
        return done / seconds


def make_setups(cfg, game, evaluator: TorchEvaluator, entries: int, reuse: bool,
                seed: int) -> list[Setup]:
    search, sp = cfg.search, cfg.selfplay

    def worker(ev, s, seed_: int) -> SelfPlayWorker:
        return SelfPlayWorker(game, ev, s, sp, seed=seed_)

    setups = []
    variants = [("", search)]
    if reuse:
        variants.append(("reuse", dataclasses.replace(search, reuse_tree=True)))
    for prefix, s in variants:
        setups.append(Setup(prefix or "base", [worker(evaluator, s, seed)], None))
        cache = CachedEvaluator(evaluator, entries)
        setups.append(Setup(f"{prefix}+cache" if prefix else "cache",
                            [worker(cache, s, seed)], cache))
    shared = CachedEvaluator(evaluator, entries)
    setups.append(Setup("shared x2", [worker(shared, search, seed + 1),
                                      worker(shared, search, seed + 2)], shared))
    return setups


def run_section(preset: str, rounds: int, moves: int, entries: int, reuse: bool,
                seed: int, warmup: int) -> None:
    cfg = load_train_config(preset, warn=False)
    game = make_game(cfg.game)
    torch.manual_seed(seed)
    net = build_net(cfg.net, game.spec)
    evaluator = TorchEvaluator(net, device="cpu")
    setups = make_setups(cfg, game, evaluator, entries, reuse, seed)
    for setup in setups:  # warm-up, not counted
        for w in setup.workers:
            w.play_moves(warmup)
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        order = setups[r % len(setups):] + setups[:r % len(setups)]
        rate = {setup.name: setup.play(moves) for setup in order}
        for setup in setups:
            setup.ratios.append(rate[setup.name] / rate["base"])
        loads.append(os.getloadavg()[0])
    search = cfg.search
    print(f"\n### {preset}: {game.spec.spec_string}, obs {tuple(game.spec.obs_shape)}, net of "
          f"{num_parameters(net):,} parameters, B={cfg.selfplay.games_in_parallel}, "
          f"{search.num_simulations} simulations a move, cache of {entries:,} entries\n")
    print(f"{warmup} warm-up moves, then {rounds} rounds x {moves} moves per setup, "
          f"interleaved; load average (1 min) "
          f"{min(loads):.2f}-{max(loads):.2f} during the section\n")
    print("| setup | positions/s | × base (median of rounds) | hit rate | "
          "network evaluations per position |")
    print("|---|---:|---:|---:|---:|")
    sims = search.num_simulations
    for setup in setups:
        hit = f"{setup.hits / setup.lookups:.1%}" if setup.lookups else "—"
        # without a cache every simulation's leaf (bar terminal ones) is evaluated
        per_pos = setup.evaluated / setup.positions if setup.cache is not None else sims
        approx = "" if setup.cache is not None else "≤ "
        print(f"| {setup.name} | {setup.positions / setup.seconds:,.2f} | "
              f"{statistics.median(setup.ratios):.2f} | {hit} | {approx}{per_pos:,.0f} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="*", default=["gomoku6", "gomoku8", "go9"],
                        help="config presets (deploy/configs/NAME.yaml)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--moves", type=int, default=2, help="moves per setup per round")
    parser.add_argument("--entries", type=int, default=200_000,
                        help="cache capacity in positions")
    parser.add_argument("--reuse", action="store_true",
                        help="also rows with search.reuse_tree on")
    parser.add_argument("--warmup", type=int, default=1,
                        help="moves every worker plays before the measured rounds (the B "
                             "games start together, so their first moves repeat the most)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    for preset in args.games:
        run_section(preset, args.rounds, args.moves, args.entries, args.reuse, args.seed,
                    max(1, args.warmup))


if __name__ == "__main__":
    main()
