"""Self-play throughput of the distributed run against the single-process loop.

Same game, net, search settings *and weights* in both: the distributed run's learner never
trains (``learner.min_replay`` out of reach), so its workers play with the version-0
weights the learner publishes, which are the single-process worker's weights too (both
built from ``learner.seed``). Trained weights change game lengths and so positions/s, which
made an earlier version of this table compare unlike with unlike. The single-process
figure is a SelfPlayWorker alone (no learner turns in between: the best a process can
do); the distributed figures are the run's ``selfplay_positions_total`` rate with 1 and 2
workers, measured over a window after a warm-up. What is left is the distributed
machinery's cost: encoding and appending games, weight polls, Ray scheduling.

    python benchmarks/bench_distributed.py [--config gomoku6] [--seconds 60]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time

import torch

from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.cluster import disconnect, init_local
from zeroforge.deploy.ray.handle import start_run
from zeroforge.shared import metrics
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import TorchEvaluator, build_net
from zeroforge.shared.transport import RedisServer

FROZEN = "learner.min_replay=1000000000"
"""The learner never trains: every worker keeps the version-0 weights."""


def single_process(config, seconds: float) -> float:
    torch.set_num_threads(1)
    game = make_game(config.game)
    torch.manual_seed(config.learner.seed)  # the learner's version-0 weights
    net = build_net(config.net, game.spec)
    worker = SelfPlayWorker(game, TorchEvaluator(net, device="cpu"), config.search,
                            config.selfplay, seed=0)
    worker.play_moves(2)  # warm-up (numba, torch)
    start, positions = time.monotonic(), worker.stats.positions
    while time.monotonic() - start < seconds:
        worker.play_moves(1)
    return (worker.stats.positions - positions) / (time.monotonic() - start)


def distributed(config, workers: int, seconds: float, warmup: float) -> float:
    with RedisServer() as redis:
        init_local()
        try:
            run_id = f"bench-{workers}-{int(time.time())}"
            ctx = dataclasses.replace(config.context(run_id, redis.url),
                                      run_dir=f"/tmp/zf-bench/{run_id}")
            run = start_run(config, ctx)
            run.scale(workers=workers)
            time.sleep(warmup)

            def positions() -> float:
                merged = metrics.merge([run.metrics_snapshot()])
                return metrics.total(merged, "selfplay_positions_total", worker_kind="selfplay")

            p0, t0 = positions(), time.monotonic()
            time.sleep(seconds)
            rate = (positions() - p0) / (time.monotonic() - t0)
            run.stop()
            run.shutdown()
            return rate
        finally:
            disconnect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gomoku6")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_train_config(args.config, ["distributed.evaluator=false", FROZEN,
                                             "distributed.inference=local", *args.overrides])
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; game {config.game}, "
          f"{config.search.num_simulations} simulations, B={config.selfplay.games_in_parallel}")
    base = single_process(config, args.seconds)
    rows = [("single process (self-play only)", base)]
    for n in (1, 2):
        rows.append((f"distributed, {n} worker(s) + learner", distributed(
            config, n, args.seconds, args.warmup)))
    print("| setup | positions/s | vs single process |\n|---|---:|---:|")
    for name, rate in rows:
        print(f"| {name} | {rate:.1f} | {rate / base:.0%} |")


if __name__ == "__main__":
    main()
