"""Self-play budget: tree reuse and playout-cap randomisation, on and off, interleaved.

For each game preset (``deploy/configs/<game>.yaml``: its net, search and B) five
``SelfPlayWorker``s run side by side in one process, one per setup:

- **base**: the preset's search (with ``--set`` overrides), every move a fresh tree with
  the full ``num_simulations``;
- **reuse**: ``reuse_tree`` on (the played move's subtree is kept; the root is re-noised);
- **cap**: playout-cap randomisation, ``full_search_prob`` 0.25 and ``fast_simulations``
  ``num_simulations // 6`` unless given (KataGo's 600 / 100);
- **reuse+cap**: both;
- **gumbel**: Gumbel AlphaZero search with ``--gumbel-sims`` simulations (32 unless given)
  instead of the preset's PUCT budget: Gumbel's improved policy is a sound target at few
  simulations, so every position still teaches the policy.

The workers take turns: each round every setup plays ``--moves`` moves (for all B games)
on its own worker, which keeps its games going between rounds, so all five see the same
load drift and the same mix of opening and late positions. A round's order rotates. Per
setup the table gives positions/s (moves played, summed over the batch; totals over all
rounds) and the median over rounds of its ratio to the base's in the same round, policy
targets/s (positions recorded with a search policy; all of them without the cap), the
simulations run per recorded policy target (all simulations, fast moves' included, over
the targets), and the root visits carried over from the previous move's tree.

The network is the preset's architecture with random weights: a trained net's trees are
more concentrated, so reuse keeps more visits there than here. Throughput only: strength
at equal wall clock is not measured here (it needs a quiet machine and learning runs).

    python benchmarks/bench_selfplay_budget.py                      # gomoku6 and gomoku8
    python benchmarks/bench_selfplay_budget.py --games gomoku6 --rounds 5 --moves 8
    # against the PUCT budget the gomoku 6x6 preset had before it self-played with Gumbel
    python benchmarks/bench_selfplay_budget.py --games gomoku6 \
        --set search.gumbel=false --set search.num_simulations=128

Torch runs on one thread (``torch.set_num_threads(1)``), on the CPU, in the preset's
``selfplay.precision`` (``--set selfplay.precision=float32`` for float32 where a preset
asks for bfloat16).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time

import numpy as np
import torch
from machine import machine_line  # benchmarks/machine.py (scripts run from here)

from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.deploy.config import load_train_config
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import InferenceConfig, TorchEvaluator, build_net, num_parameters
from zeroforge.shared.search import SearchConfig

SETUPS = ("base", "reuse", "cap", "reuse+cap", "gumbel")


def setup_config(base: SearchConfig, setup: str, prob: float,
                 fast: int | None, gumbel_sims: int = 32) -> SearchConfig:
    """The preset's search config with this setup's reuse and playout cap, or Gumbel."""
    if setup == "gumbel":
        return dataclasses.replace(base, gumbel=True, num_simulations=gumbel_sims,
                                   reuse_tree=False, full_search_prob=1.0,
                                   fast_simulations=None)
    return dataclasses.replace(
        base, reuse_tree="reuse" in setup,
        full_search_prob=prob if "cap" in setup else 1.0,
        fast_simulations=fast if "cap" in setup else None)


def run_section(preset: str, rounds: int, moves: int, prob: float, fast: int | None,
                seed: int, gumbel_sims: int = 32, overrides: tuple[str, ...] = ()) -> None:
    cfg = load_train_config(preset, list(overrides), warn=False)
    game = make_game(cfg.game)
    torch.manual_seed(seed)
    net = build_net(cfg.net, game.spec)
    evaluator = TorchEvaluator(net, config=InferenceConfig(
        device="cpu", precision=cfg.selfplay.precision))
    batch = cfg.selfplay.games_in_parallel
    configs = {s: setup_config(cfg.search, s, prob, fast, gumbel_sims) for s in SETUPS}
    workers = {s: SelfPlayWorker(game, evaluator, c, cfg.selfplay, seed=seed)
               for s, c in configs.items()}
    for w in workers.values():  # warm-up: numba dispatch, oneDNN primitives, first trees
        w.play_moves(1)
    # per setup: [positions, policy targets, simulations, seconds] summed over rounds, and
    # each round's positions/s over the base's of the same round
    totals = {s: np.zeros(4) for s in SETUPS}
    ratios: dict[str, list[float]] = {s: [] for s in SETUPS}
    loads = [os.getloadavg()[0]]
    for r in range(rounds):
        order = SETUPS[r % len(SETUPS):] + SETUPS[:r % len(SETUPS)]
        rate = {}
        for s in order:
            w = workers[s]
            st = w.stats
            before = (st.positions, st.policy_targets, st.simulations)
            start = time.perf_counter()
            w.play_moves(moves)
            seconds = time.perf_counter() - start
            done = np.array([st.positions - before[0], st.policy_targets - before[1],
                             st.simulations - before[2], seconds])
            totals[s] += done
            rate[s] = done[0] / seconds
        for s in SETUPS:
            ratios[s].append(rate[s] / rate["base"])
        loads.append(os.getloadavg()[0])
    search = cfg.search
    fast_sims = configs["cap"].fast_budget
    print(f"\n### {preset}: {game.spec.spec_string}, net of {num_parameters(net):,} parameters, "
          f"B={batch}, {search.num_simulations} simulations a full move; cap: p={prob}, "
          f"{fast_sims} simulations a fast move\n")
    print(f"{rounds} rounds x {moves} moves per setup, interleaved; load average (1 min) "
          f"{min(loads):.2f}-{max(loads):.2f} during the section\n")
    print("| setup | positions/s | × base (median of rounds) | policy targets/s | × base | "
          "simulations per policy target | reused root visits per move |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = totals["base"]
    for s in SETUPS:
        pos, tgt, sims, secs = totals[s]
        spt = f"{sims / tgt:,.0f}" if tgt else "— (no full move)"
        kept = workers[s].stats.reused_visits / max(1, workers[s].stats.positions)
        print(f"| {s} | {pos / secs:,.1f} | {statistics.median(ratios[s]):.2f} | "
              f"{tgt / secs:,.1f} | {(tgt / secs) / (base[1] / base[3]):.2f} | {spt} | "
              f"{kept:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="*", default=["gomoku6", "gomoku8"],
                        help="config presets (deploy/configs/NAME.yaml)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--moves", type=int, default=6, help="moves per setup per round")
    parser.add_argument("--full-prob", type=float, default=0.25,
                        help="full_search_prob of the cap setups")
    parser.add_argument("--fast", type=int, default=None,
                        help="fast_simulations of the cap setups (default num_simulations // 6)")
    parser.add_argument("--gumbel-sims", type=int, default=32,
                        help="simulations a move of the gumbel setup")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="KEY=VALUE override of the presets (repeatable), e.g. the PUCT "
                        "budget the gomoku presets had before Gumbel: search.gumbel=false "
                        "search.num_simulations=128")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    for preset in args.games:
        run_section(preset, args.rounds, args.moves, args.full_prob, args.fast, args.seed,
                    args.gumbel_sims, tuple(args.overrides))


if __name__ == "__main__":
    main()
