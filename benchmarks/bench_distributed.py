"""Self-play throughput of the distributed run against the single-process loop.

Same game, net and search settings in both. The single-process figure is a SelfPlayWorker
alone (no learner turns in between: the best a process can do); the distributed figures
are the run's `selfplay_positions_total` rate with 1 and 2 workers while the learner trains
beside them, measured over a window after a warm-up.

    python benchmarks/bench_distributed.py [--config gomoku6] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import ray
import torch

from actors.selfplay import SelfPlayWorker
from deploy.config import load_train_config
from deploy.controller import NAMESPACE, Controller, controller_name
from shared import metrics
from shared.games import make_game
from shared.nets import build_net
from shared.torch_evaluator import TorchEvaluator
from shared.transport import RedisServer


def single_process(config, seconds: float) -> float:
    torch.set_num_threads(1)
    game = make_game(config.game)
    worker = SelfPlayWorker(game, TorchEvaluator(build_net(config.net, game.spec), device="cpu"),
                            config.search, config.selfplay, seed=0)
    worker.play_moves(2)  # warm-up (numba, torch)
    start, positions = time.monotonic(), worker.stats.positions
    while time.monotonic() - start < seconds:
        worker.play_moves(1)
    return (worker.stats.positions - positions) / (time.monotonic() - start)


def distributed(config, workers: int, seconds: float, warmup: float) -> float:
    with RedisServer() as redis:
        ray.init(num_cpus=2 * (os.cpu_count() or 2), include_dashboard=False,
                 namespace=NAMESPACE, logging_level="ERROR", _node_ip_address="127.0.0.1")
        try:
            run_id = f"bench-{workers}-{int(time.time())}"
            controller = ray.remote(Controller).options(
                name=controller_name(run_id), max_concurrency=16, num_cpus=0).remote(
                config, redis.url, run_id, f"/tmp/zf-bench/{run_id}", False)
            ray.get(controller.start.remote())
            ray.get(controller.scale.remote(workers=workers))
            time.sleep(warmup)

            def positions() -> float:
                snap = ray.get(controller.metrics_snapshot.remote())
                merged = metrics.merge([snap])
                return metrics.value(merged, "selfplay_positions_total", worker_kind="selfplay")

            p0, t0 = positions(), time.monotonic()
            time.sleep(seconds)
            rate = (positions() - p0) / (time.monotonic() - t0)
            ray.get(controller.stop.remote())
            return rate
        finally:
            ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="gomoku6")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    config = load_train_config(args.config, ["distributed.evaluator=false",
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
