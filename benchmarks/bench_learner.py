"""Learner SGD steps per second by precision and memory layout.

Each row is one ``Learner.step`` setup on a full replay window of random positions
(``batch_size`` positions a step, symmetry augmentation on, AdamW): the forward pass in
float32 with the NCHW layout (the learner before channels-last), float32 channels-last
(today's float32), and bfloat16 autocast channels-last (``learner.precision: bfloat16``,
what ``fast`` picks on CUDA or a CPU with AMX or AVX-512 BF16). Cells are milliseconds a
step, the median of ``--rounds`` interleaved rounds, and the ratio to the NCHW row.

    python benchmarks/bench_learner.py
    python benchmarks/bench_learner.py --case small:gomoku8 --batch 256 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from machine import machine_line

from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig

SETUPS = ("float32 nchw", "float32", "bfloat16")
"""Row names: ``float32 nchw`` is the learner's float32 step with the NCHW layout."""


def make_learner(setup: str, game: str, net: str, batch: int) -> Learner:
    """A learner for ``setup`` with a replay window of random (s, pi, z) rows."""
    precision = "bfloat16" if setup == "bfloat16" else "float32"
    config = LearnerConfig(batch_size=batch, optimizer="adamw", lr=1e-3, min_replay=1,
                           samples_per_insert=0, precision=precision, device="cpu")
    learner = Learner(config, game, NetConfig.preset(net))
    if setup == "float32 nchw":
        learner._channels_last = False
        learner.net = learner.net.to(memory_format=torch.contiguous_format)  # type: ignore[call-overload]
    spec = learner.game.spec
    rng = np.random.default_rng(0)
    n = 4 * batch
    obs = (rng.random((n, *spec.obs_shape)) < 0.3).astype(np.uint8)
    policy = rng.dirichlet(np.ones(spec.num_actions), size=n).astype(np.float32)
    value = rng.choice([-1.0, 0.0, 1.0], size=n).astype(np.float32)
    learner.replay.add_arrays(obs, policy, value)
    return learner


def time_steps(learner: Learner, steps: int) -> float:
    """Milliseconds a step over ``steps`` steps (after two warm-up steps)."""
    for _ in range(2):
        learner.step()
    start = time.perf_counter()
    for _ in range(steps):
        learner.step()
    return (time.perf_counter() - start) / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=None,
                        help="NET:GAME (repeatable; default small:gomoku6, small:gomoku8)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(machine_line())
    for case in args.case or ["small:gomoku6", "small:gomoku8"]:
        net, game = case.split(":", 1)
        make_game(game)  # a bad name fails before any timing
        learners = {s: make_learner(s, game, net, args.batch) for s in SETUPS}
        times: dict[str, list[float]] = {s: [] for s in SETUPS}
        for _ in range(args.rounds):
            for setup, learner in learners.items():
                times[setup].append(time_steps(learner, args.steps))
        base = statistics.median(times[SETUPS[0]])
        print(f"\n{net} on {game}, batch {args.batch}: ms a step (median of {args.rounds})")
        print(f"{'setup':<14} {'ms/step':>8} {'x nchw':>7}")
        for setup in SETUPS:
            ms = statistics.median(times[setup])
            print(f"{setup:<14} {ms:>8.1f} {base / ms:>7.2f}")


if __name__ == "__main__":
    main()
