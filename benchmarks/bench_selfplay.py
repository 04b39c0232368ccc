"""Self-play throughput: zeroforge's batched search against a textbook one-leaf-at-a-time MCTS.

Three rows per case, all with the same network through the same ``TorchEvaluator``:

- **baseline**: single-game PUCT MCTS as public AlphaZero code usually writes it (a
  ``TreeNode`` class with a dict of children; select by PUCT, walk the rules with batch-1
  ``game.step`` calls, call the network on ONE position at each leaf, expand with
  legal-masked softmax priors, back up negated values; terminal leaves valued by the rules);
  root Dirichlet noise, moves sampled from the visit counts;
- **zeroforge**: ``SelfPlayWorker`` with B games in lock-step (one network call per
  simulation round for all B games);
- **network bound**: evaluations/s of the evaluator alone at batch B on leaf positions from
  zeroforge's last search trees, divided by the simulations per move: the positions/s that
  self-play would reach if the search, the rules and the bookkeeping cost nothing.

Both searches evaluate the root and then run ``--simulations`` simulations per move with a
fresh tree (no reuse), and both are measured over the first moves of fresh games (a
finished game restarts). Positions/s counts moves played. The time split is the share of
wall time in the tree code (select / expand / backup), the rules (``step``, terminal / legal
gathers, state storage and ``observe``), the network call, and everything else (root noise,
move choice, zeroforge's immediate-win check and sample recording).

    python benchmarks/bench_selfplay.py --quick                 # a few minutes
    python benchmarks/bench_selfplay.py                         # more moves, B = 64, 128, 256
    python benchmarks/bench_selfplay.py --games gomoku6         # only the 6x6 table

Torch runs on one thread (``torch.set_num_threads(1)``), on the CPU. The zeroforge rows and
the network bound run at ``--precision`` (default ``fast``, what the gomoku presets'
``selfplay.precision`` says: bfloat16 where the CPU runs it natively, float32 elsewhere);
the baseline's batch-1 calls stay in float32, their fastest dtype on every CPU measured.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
from machine import machine_line  # benchmarks/machine.py (scripts run from here)

from zeroforge.actors.selfplay import SelfPlayConfig, SelfPlayWorker
from zeroforge.shared.games import Game, State, make_game
from zeroforge.shared.nets import (
    PRECISIONS,
    InferenceConfig,
    TorchEvaluator,
    build_net,
    num_parameters,
)
from zeroforge.shared.search import Evaluation, SearchConfig

SECTIONS = {
    # game -> net preset
    "gomoku6": "small",
    "gomoku15": "resnet6x64",
    "go9": "resnet6x64",
}


# --------------------------------------------------------------------------------------
# The baseline: one game, one leaf at a time
# --------------------------------------------------------------------------------------


class TreeNode:
    """One node of a textbook MCTS tree.

    ``value_sum`` is from the view of the player who made the move into this node, so a
    parent picks the child with the highest Q + U directly.
    """

    __slots__ = ("parent", "children", "prior", "visits", "value_sum")

    def __init__(self, parent: TreeNode | None, prior: float) -> None:
        self.parent = parent
        self.children: dict[int, TreeNode] = {}
        self.prior = prior
        self.visits = 0
        self.value_sum = 0.0

    def is_leaf(self) -> bool:
        return not self.children

    def q(self) -> float:
        return self.value_sum / self.visits if self.visits else 0.0

    def select(self, c_puct: float) -> tuple[int, TreeNode]:
        """The child maximising Q + c * P * sqrt(N_parent) / (1 + N_child)."""
        scale = c_puct * math.sqrt(self.visits)
        return max(self.children.items(),
                   key=lambda item: item[1].q() + scale * item[1].prior / (1 + item[1].visits))

    def expand(self, actions: list[int], priors: list[float]) -> None:
        for a, p in zip(actions, priors, strict=True):
            if a not in self.children:
                self.children[a] = TreeNode(self, p)

    def backup(self, value: float) -> None:
        """Add ``value`` (this node's mover's view) here and alternate signs up the path."""
        node: TreeNode | None = self
        while node is not None:
            node.visits += 1
            node.value_sum += value
            value = -value
            node = node.parent


class BaselineMCTS:
    """Single-game PUCT search over batch-1 states of a ``Game``; one network call per leaf."""

    def __init__(self, game: Game, evaluator: TorchEvaluator, config: SearchConfig) -> None:
        self.game = game
        self.evaluator = evaluator
        self.config = config
        self.timings = {"tree": 0.0, "rules": 0.0, "network": 0.0}
        self.evaluations = 0

    def _playout(self, root: TreeNode, root_state: State) -> None:
        game, timings, c_puct = self.game, self.timings, self.config.c_puct
        node, state = root, root_state
        while True:
            t0 = time.perf_counter()
            if node.is_leaf():
                timings["tree"] += time.perf_counter() - t0
                break
            action, node = node.select(c_puct)
            t1 = time.perf_counter()
            state = game.step(state, [action])
            timings["tree"] += t1 - t0
            timings["rules"] += time.perf_counter() - t1
        t0 = time.perf_counter()
        if state.terminal[0]:
            # Value for the player to move at the leaf, from the rules.
            value = float(state.outcome[0]) * (1.0 if state.to_play[0] == 0 else -1.0)
            t1 = t2 = time.perf_counter()
            timings["rules"] += t1 - t0
        else:
            obs = game.observe(state)
            legal = state.legal
            t1 = time.perf_counter()
            ev = self.evaluator.evaluate(obs, legal)
            t2 = time.perf_counter()
            self.evaluations += 1
            actions = np.flatnonzero(legal[0])
            logits = ev.policy_logits[0, actions]
            p = np.exp(logits - logits.max())
            p /= p.sum()
            node.expand(actions.tolist(), p.tolist())
            value = float(ev.value[0])
            timings["rules"] += t1 - t0
            timings["network"] += t2 - t1
        node.backup(-value)  # stored from the view of the player who moved into the leaf
        timings["tree"] += time.perf_counter() - t2

    def search(self, state: State, rng: np.random.Generator) -> np.ndarray:
        """Visit counts [A] after the root's evaluation and ``num_simulations`` playouts."""
        cfg = self.config
        root = TreeNode(None, 1.0)
        self._playout(root, state)  # evaluates and expands the root
        if cfg.add_noise and root.children:
            t0 = time.perf_counter()
            kids = list(root.children.values())
            alpha = cfg.dirichlet_alpha or 10.0 / len(kids)
            eta = rng.dirichlet(np.full(len(kids), alpha))
            eps = cfg.dirichlet_fraction
            for child, e in zip(kids, eta, strict=True):
                child.prior = (1 - eps) * child.prior + eps * float(e)
            self.timings["tree"] += time.perf_counter() - t0
        for _ in range(cfg.num_simulations):
            self._playout(root, state)
        counts = np.zeros(self.game.spec.num_actions)
        for a, child in root.children.items():
            counts[a] = child.visits
        return counts


def choose_move(counts: np.ndarray, ply: int, config: SearchConfig,
                rng: np.random.Generator) -> int:
    """Sample ∝ visits^(1/T) while the game is young, else the most visited move."""
    if ply < config.temperature_moves and config.temperature > 0:
        w = counts ** (1.0 / config.temperature)
        return int(rng.choice(counts.size, p=w / w.sum()))
    return int(counts.argmax())


def measure_baseline(game: Game, evaluator: TorchEvaluator, config: SearchConfig,
                     moves: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    mcts = BaselineMCTS(game, evaluator, SearchConfig(num_simulations=4))
    mcts.search(game.init(1), rng)  # warm-up: first calls of the rules and the network
    mcts = BaselineMCTS(game, evaluator, config)
    state = game.init(1)
    start = time.perf_counter()
    for _ in range(moves):
        counts = mcts.search(state, rng)
        state = game.step(state, [choose_move(counts, int(state.ply[0]), config, rng)])
        if state.terminal[0]:
            state = game.init(1)
    total = time.perf_counter() - start
    return {"positions_per_s": moves / total, "seconds": total, "split": dict(mcts.timings),
            "net_evals_per_s": mcts.evaluations / max(mcts.timings["network"], 1e-9)}


# --------------------------------------------------------------------------------------
# zeroforge: SelfPlayWorker with B games in lock-step
# --------------------------------------------------------------------------------------


@dataclass
class TimedEvaluator:
    """Passes calls to ``inner`` and adds up the time and positions spent inside it."""

    inner: TorchEvaluator
    seconds: float = 0.0
    calls: int = 0
    positions: int = 0

    @property
    def weights_version(self) -> int:
        return self.inner.weights_version

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        t0 = time.perf_counter()
        ev = self.inner.evaluate(obs, legal)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.positions += obs.shape[0]
        return ev


def measure_zeroforge(game: Game, evaluator: TorchEvaluator, config: SearchConfig,
                      batch: int, moves: int, seed: int) -> tuple[dict, SelfPlayWorker]:
    # Warm-up at the same batch size: numba dispatch, oneDNN primitives for these shapes.
    warm = SelfPlayWorker(game, evaluator, SearchConfig(num_simulations=2),
                          SelfPlayConfig(games_in_parallel=batch), seed=seed)
    warm.play_moves(1)
    timed = TimedEvaluator(evaluator)
    worker = SelfPlayWorker(game, timed, config, SelfPlayConfig(games_in_parallel=batch),
                            seed=seed)
    start = time.perf_counter()
    worker.play_moves(moves)
    total = time.perf_counter() - start
    t = worker.mcts.timings
    split = {"tree": t["tree"], "rules": t["step"] + t["evaluate"] - timed.seconds,
             "network": timed.seconds, "rollout": t["rollout"]}
    return {"positions_per_s": worker.stats.positions / total, "seconds": total,
            "split": split, "net_evals_per_s": timed.positions / timed.seconds,
            "mean_batch": timed.positions / max(1, timed.calls)}, worker


def leaf_batch(game: Game, worker: SelfPlayWorker, batch: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Observations and masks of ``batch`` running non-root nodes of the worker's trees."""
    tree = worker.mcts.tree
    assert tree is not None
    games = np.concatenate([np.full(n - 1, b) for b, n in enumerate(tree.num_nodes) if n > 1])
    nodes = np.concatenate([np.arange(1, n) for n in tree.num_nodes if n > 1])
    running = ~tree.terminal[games, nodes]
    games, nodes = games[running], nodes[running]
    pick = rng.choice(games.size, size=batch, replace=games.size < batch)
    states = tree.states.take(tree.flat(games[pick], nodes[pick]))
    return game.observe(states), game.legal_mask(states)


def network_bound(evaluator: TorchEvaluator, obs: np.ndarray, legal: np.ndarray,
                  min_seconds: float) -> float:
    """Evaluations/s of ``evaluator`` alone on this batch (after two warm-up calls)."""
    evaluator.evaluate(obs, legal)
    evaluator.evaluate(obs, legal)
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < min_seconds:
        evaluator.evaluate(obs, legal)
        calls += 1
    return calls * obs.shape[0] / (time.perf_counter() - start)


# --------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------

COLUMNS = ["tree", "rules", "network", "other"]


def split_cells(result: dict) -> str:
    split = dict(result["split"])
    split["rules"] += split.pop("rollout", 0.0)
    split["other"] = result["seconds"] - sum(split.values())
    return " | ".join(f"{100 * split[c] / result['seconds']:.0f}" for c in COLUMNS)


def run_section(spec: str, batches: list[int], moves: int, baseline_moves: int,
                simulations: int, bound_seconds: float, seed: int,
                precision: str = "fast") -> None:
    preset = SECTIONS[spec]
    game = make_game(spec)
    net = build_net(preset, game.spec)
    base_evaluator = TorchEvaluator(net, device="cpu")
    evaluator = TorchEvaluator(net, config=InferenceConfig(device="cpu", precision=precision))
    config = SearchConfig(num_simulations=simulations)
    load = os.getloadavg()[0]
    dtype = str(evaluator.dtype).removeprefix("torch.")
    print(f"\n### {spec} ({game.spec.spec_string}), `{preset}` net "
          f"({num_parameters(net):,} parameters), {simulations} simulations a move, "
          f"precision {precision} ({dtype})\n")
    print(f"baseline: {baseline_moves} moves of one game; zeroforge: {moves} moves of B games "
          f"after a warm-up; load average at start {load:.2f}\n")
    print("| setup | positions/s | × baseline | % of network bound | network evals/s | "
          + " | ".join(f"{c} %" for c in COLUMNS) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(COLUMNS))
    base = measure_baseline(game, base_evaluator, config, baseline_moves, seed)
    print(f"| baseline (1 game, batch-1 net) | {base['positions_per_s']:,.2f} | 1.0 | "
          f"— | {base['net_evals_per_s']:,.0f} at batch 1 | {split_cells(base)} |", flush=True)
    rng = np.random.default_rng(seed)
    for batch in batches:
        zf, worker = measure_zeroforge(game, evaluator, config, batch, moves, seed + batch)
        obs, legal = leaf_batch(game, worker, batch, rng)
        evals = network_bound(evaluator, obs, legal, bound_seconds)
        bound = evals / simulations
        pct = 100 * zf["positions_per_s"] / bound
        ratio = zf["positions_per_s"] / base["positions_per_s"]
        print(f"| zeroforge B={batch} | {zf['positions_per_s']:,.2f} | {ratio:.1f} | "
              f"{pct:.0f} | {zf['net_evals_per_s']:,.0f} in search "
              f"(mean batch {zf['mean_batch']:.1f}) | {split_cells(zf)} |")
        print(f"| network bound B={batch} | {bound:,.2f} | "
              f"{bound / base['positions_per_s']:.1f} | 100 | {evals:,.0f} alone | "
              + " | ".join("—" for _ in COLUMNS) + " |", flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer moves and batch sizes: a few minutes in all")
    parser.add_argument("--games", nargs="*", default=list(SECTIONS), choices=list(SECTIONS),
                        help="sections to run (default: all)")
    parser.add_argument("--simulations", type=int, default=400)
    parser.add_argument("--batches", nargs="*", type=int, default=None,
                        help="zeroforge B for gomoku6 (default 64 128 256; --quick 64 128)")
    parser.add_argument("--big-batch", type=int, default=64,
                        help="zeroforge B for the resnet6x64 sections (default 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="fast", choices=PRECISIONS,
                        help="dtype of the zeroforge rows' network (default: fast, the "
                             "gomoku presets' selfplay.precision)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    quick = args.quick
    print(machine_line())
    print(f"mode: {'quick' if quick else 'full'}; positions/s = moves played per second "
          "(summed over the batch); network bound = evaluations/s alone ÷ simulations")
    for spec in args.games:
        if spec == "gomoku6":
            batches = args.batches or ([64, 128] if quick else [64, 128, 256])
            moves, baseline_moves = (3, 8) if quick else (8, 20)
        else:
            batches = [args.big_batch]
            moves, baseline_moves = (1, 2) if quick else (3, 6)
        run_section(spec, batches, moves, baseline_moves, args.simulations,
                    bound_seconds=1.5 if quick else 4.0, seed=args.seed,
                    precision=args.precision)


if __name__ == "__main__":
    main()
