"""Learner steps/s of a data-parallel group of R replicas against one learner (gloo on CPU).

Rank 0 runs in this process with a replay window of made-up positions (random stones,
random policy targets, random outcomes: the step's cost does not depend on them); ranks
1.. are child processes of this script (``--peer``), as the runtime's replicas are Ray
actors. Every replica gets ``--threads`` torch threads and, with ``--pin``, core
``rank % cores``. The global batch is ``--batch`` whatever R: each replica trains
``batch / R`` positions a step, so at equal steps/s the group does what one learner does.

    python benchmarks/bench_learner_replicas.py --game gomoku8 --net small --replicas 1 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.learner.replica_group import GroupAddress, LearnerReplica, ReplicaGroup
from zeroforge.shared.nets import NetConfig


def learner_config(args: argparse.Namespace) -> LearnerConfig:
    return LearnerConfig(batch_size=args.batch, min_replay=1, samples_per_insert=0,
                         replay_capacity=4096, device="cpu", precision=args.precision,
                         optimizer="adamw", lr=0.002)


def filled(config: LearnerConfig, args: argparse.Namespace) -> Learner:
    learner = Learner(config, args.game, NetConfig.preset(args.net))
    spec = learner.game.spec
    rng = np.random.default_rng(0)
    n = config.replay_capacity
    obs = rng.integers(0, 2, size=(n, *spec.obs_shape), dtype=np.uint8)
    policy = rng.random((n, spec.num_actions)).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    learner.replay.add_arrays(obs, policy, rng.choice([-1.0, 1.0], size=n).astype(np.float32))
    return learner


def pin(rank: int, args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    if args.pin:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[rank % len(cores)]})


def peer(argv: list[str]) -> None:
    """``--peer RANK REPLICAS HOST PORT ARGS_JSON``: one replica, until rank 0's STOP."""
    rank, replicas, host, port = int(argv[0]), int(argv[1]), argv[2], int(argv[3])
    args = argparse.Namespace(**json.loads(argv[4]))
    pin(rank, args)
    config = dataclasses.replace(learner_config(args), replay_capacity=1)
    learner = Learner(config, args.game, NetConfig.preset(args.net))
    LearnerReplica(learner, rank, replicas, lambda: GroupAddress(host, port)).run()


def measure(replicas: int, args: argparse.Namespace) -> list[float]:
    """Steps/s of each timed round for a group of ``replicas``."""
    pin(0, args)
    learner = filled(learner_config(args), args)
    group, peers = None, []
    if replicas > 1:
        group = ReplicaGroup(replicas, timeout_s=120)
        spec = json.dumps(vars(args))
        peers = [subprocess.Popen([sys.executable, __file__, "--peer", str(rank),
                                   str(replicas), group.address.host,
                                   str(group.address.port), spec])
                 for rank in range(1, replicas)]
        learner.join_group(group)
    try:
        for _ in range(args.warmup):
            learner.step()
        rates = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for _ in range(args.steps):
                learner.step()
            rates.append(args.steps / (time.perf_counter() - start))
        return rates
    finally:
        if group is not None:
            group.stop()
        for p in peers:
            p.wait(60)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        peer(sys.argv[2:])
        sys.stdout.flush()
        os._exit(0)  # no teardown of the left group (see replica_group._LEFT_GROUPS)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="gomoku8")
    parser.add_argument("--net", default="small")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=20, help="steps a timed round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5, help="steps before timing")
    parser.add_argument("--threads", type=int, default=1, help="torch threads a replica")
    parser.add_argument("--pin", action="store_true", help="replica r on core r % cores")
    parser.add_argument("--json", default=None, help="rows also here")
    args = parser.parse_args()
    rows = []
    for replicas in args.replicas:
        rates = measure(replicas, args)
        rows.append({"replicas": replicas, "steps_per_s": rates,
                     "median": statistics.median(rates)})
        print(f"R={replicas}: {', '.join(f'{r:.2f}' for r in rates)} steps/s", flush=True)
    base = rows[0]["median"]
    print(f"\n{args.game}, net {args.net}, global batch {args.batch}, {args.precision}, "
          f"{args.threads} thread(s) a replica{', pinned' if args.pin else ''}; "
          f"{os.cpu_count()} cores")
    print("| replicas | steps/s (median of rounds) | positions/s | x R=first |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['replicas']} | {row['median']:.2f} | {row['median'] * args.batch:,.0f} | "
              f"{row['median'] / base:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
