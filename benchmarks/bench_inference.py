"""How well one InferenceServer actor merges the leaf batches of concurrent clients.

For 1, 2 and 4 clients (Ray actors), each sending a leaf batch of B positions at a time
and waiting for the answer before the next, as a self-play worker does:

- ``leaf`` mode (default): clients send random observations in a tight loop, so the
  server sees the most traffic the clients can generate;
- ``selfplay`` mode: each client runs a real SelfPlayWorker (B games, batched MCTS) with
  a RemoteEvaluator, so the time between requests is the search's;
- ``--no-ray``: leaf clients are coroutines in this process calling the server directly,
  which isolates the batcher (and the device) from Ray's per-call cost; it needs no Ray.

Reported per row, over the timed window: network calls, mean positions per call and its
fill (divided by max_batch), mean requests per call, the server's mean queue wait, request
round-trip latency p50/p99 as the client sees it (Ray call included) and positions
evaluated per second. A first table gives the in-process TorchEvaluator at batch B, 4B
and 16B: the ceiling the server's batching can approach on this machine.

    python benchmarks/bench_inference.py --quick                  # about a minute
    python benchmarks/bench_inference.py --mode selfplay --batch 16 --simulations 64
    python benchmarks/bench_inference.py --no-ray --clients 1,4,16,64 --net resnet6x64
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time

import numpy as np
from server_stats import batching, mean_ms  # benchmarks/ (scripts run from here)

from zeroforge.actors.inference import InferenceServer, InferenceServerConfig
from zeroforge.deploy.ray.hosts import RemoteEvaluator, make_inference_actor
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import InferenceConfig, NetConfig, TorchEvaluator, build_net


class LeafClient:
    """Sends leaf batches of ``batch`` random positions to the servers, one at a time."""

    def __init__(self, servers: list, game: str, batch: int, seed: int) -> None:
        spec = make_game(game).spec
        rng = np.random.default_rng(seed)
        self.obs = (rng.random((batch, *spec.obs_shape)) < 0.3).astype(np.uint8)
        self.legal = np.ones((batch, spec.num_actions), bool)
        self.evaluator = RemoteEvaluator(servers)

    def warm_up(self, calls: int) -> None:
        for _ in range(calls):
            self.evaluator.evaluate(self.obs, self.legal)

    def run(self, seconds: float) -> tuple[np.ndarray, int]:
        """Round-trip latencies [n] float64 (s) and the positions sent in ``seconds``."""
        latencies = []
        end = time.perf_counter() + seconds
        while (start := time.perf_counter()) < end:
            self.evaluator.evaluate(self.obs, self.legal)
            latencies.append(time.perf_counter() - start)
        return np.array(latencies), len(latencies) * len(self.obs)


class TimedEvaluator:
    """Wraps an evaluator and records each call's latency."""

    def __init__(self, inner: RemoteEvaluator) -> None:
        self.inner = inner
        self.latencies: list[float] = []
        self.positions = 0

    @property
    def weights_version(self) -> int:
        return self.inner.weights_version

    def evaluate(self, obs: np.ndarray, legal: np.ndarray):
        start = time.perf_counter()
        ev = self.inner.evaluate(obs, legal)
        self.latencies.append(time.perf_counter() - start)
        self.positions += len(obs)
        return ev


class SelfPlayClient:
    """A SelfPlayWorker with B games whose evaluations go to the servers."""

    def __init__(self, servers: list, game: str, batch: int, seed: int,
                 simulations: int) -> None:
        from zeroforge.actors.selfplay import SelfPlayConfig, SelfPlayWorker
        from zeroforge.shared.search import SearchConfig

        self.evaluator = TimedEvaluator(RemoteEvaluator(servers))
        self.worker = SelfPlayWorker(make_game(game), self.evaluator,
                                     SearchConfig(num_simulations=simulations),
                                     SelfPlayConfig(games_in_parallel=batch), seed=seed)

    def warm_up(self, calls: int) -> None:
        self.worker.play_moves(1)

    def run(self, seconds: float) -> tuple[np.ndarray, int]:
        self.evaluator.latencies, self.evaluator.positions = [], 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.worker.play_moves(1)
        return np.array(self.evaluator.latencies), self.evaluator.positions


def in_process(game: str, net: NetConfig, batch: int, seconds: float) -> list[tuple]:
    """Positions/s of a TorchEvaluator in this process at batch B, 4B and 16B (one
    thread)."""
    spec = make_game(game).spec
    evaluator = TorchEvaluator(build_net(net, spec), config=InferenceConfig(num_threads=1))
    rows = []
    for b in (batch, 4 * batch, 16 * batch):
        obs = np.zeros((b, *spec.obs_shape), np.uint8)
        legal = np.ones((b, spec.num_actions), bool)
        evaluator.evaluate(obs, legal)
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            evaluator.evaluate(obs, legal)
            calls += 1
        elapsed = time.perf_counter() - start
        rows.append((b, elapsed / calls * 1e3, calls * b / elapsed))
    return rows


def summarise(args: argparse.Namespace, clients: int, before: dict, after: dict,
              results: list[tuple[np.ndarray, int]], wall: float) -> dict:
    """One table row from server snapshots around the window and the clients' results."""
    totals = batching(before, after)
    calls, positions, requests = totals["calls"], totals["positions"], totals["requests"]
    latencies = np.concatenate([lat for lat, _ in results])
    return {
        "clients": clients, "calls": int(calls),
        "positions_per_call": positions / max(calls, 1),
        "fill": positions / max(calls, 1) / args.max_batch,
        "requests_per_call": requests / max(calls, 1),
        "wait_ms": mean_ms(totals["waits"]),
        "p50_ms": float(np.percentile(latencies, 50)) * 1e3,
        "p99_ms": float(np.percentile(latencies, 99)) * 1e3,
        "evals_per_s": sum(p for _, p in results) / wall,
    }


def bench_ray_clients(server, args: argparse.Namespace, clients: int) -> dict:
    """Client actors, each with a RemoteEvaluator, against the server actor."""
    import ray

    if args.mode == "leaf":
        cls, extra = ray.remote(num_cpus=0)(LeafClient), ()
    else:
        cls, extra = ray.remote(num_cpus=0)(SelfPlayClient), (args.simulations,)
    actors = [cls.remote([server], args.game, args.batch, seed, *extra)
              for seed in range(clients)]
    try:
        ray.get([a.warm_up.remote(5) for a in actors])
        before = ray.get(server.stats.remote())
        start = time.perf_counter()
        results = ray.get([a.run.remote(args.seconds) for a in actors])
        wall = time.perf_counter() - start
        after = ray.get(server.stats.remote())
    finally:
        for a in actors:
            ray.kill(a)
    return summarise(args, clients, before, after, results, wall)


async def bench_coroutine_clients(server: InferenceServer, args: argparse.Namespace,
                                  clients: int) -> dict:
    """Leaf clients as coroutines on the server's own event loop (no Ray)."""
    spec = make_game(args.game).spec
    legal = np.ones((args.batch, spec.num_actions), bool)

    async def client(seed: int, seconds: float) -> tuple[np.ndarray, int]:
        rng = np.random.default_rng(seed)
        obs = (rng.random((args.batch, *spec.obs_shape)) < 0.3).astype(np.uint8)
        latencies = []
        end = time.perf_counter() + seconds
        while (start := time.perf_counter()) < end:
            await server.evaluate(obs, legal)
            latencies.append(time.perf_counter() - start)
        return np.array(latencies), len(latencies) * args.batch

    await asyncio.gather(*(client(seed, 0.5) for seed in range(clients)))  # warm-up
    before = server.stats()
    start = time.perf_counter()
    results = await asyncio.gather(*(client(seed, args.seconds) for seed in range(clients)))
    wall = time.perf_counter() - start
    return summarise(args, clients, before, server.stats(), list(results), wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("leaf", "selfplay"), default="leaf")
    parser.add_argument("--game", default="gomoku6")
    parser.add_argument("--net", default="small", help="net preset")
    parser.add_argument("--batch", type=int, default=64, help="B: positions per request")
    parser.add_argument("--clients", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed window per row")
    parser.add_argument("--simulations", type=int, default=64, help="selfplay mode")
    parser.add_argument("--max-batch", type=int, default=1024)
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-ray", action="store_true",
                        help="coroutine clients in this process, no Ray")
    parser.add_argument("--quick", action="store_true", help="8 s rows: about a minute")
    args = parser.parse_args()
    if args.quick:
        args.seconds = min(args.seconds, 8.0)
    net = NetConfig.preset(args.net)

    print(f"# InferenceServer batching: {args.game}, net {args.net}, {args.mode} clients, "
          f"B={args.batch}, max_batch={args.max_batch}, max_wait={args.max_wait_ms} ms")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| in-process batch | ms / call | positions/s |\n|---:|---:|---:|")
    for b, ms, rate in in_process(args.game, net, args.batch, min(args.seconds, 3.0)):
        print(f"| {b} | {ms:.2f} | {rate:,.0f} |")

    config = InferenceServerConfig(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms,
                                   device=args.device, num_cpus=1)
    header = ("\n| clients | calls | positions/call | fill | requests/call | queue wait ms "
              "| latency p50 ms | p99 ms | evals/s |\n" + "|---:" * 9 + "|")
    counts = [int(c) for c in args.clients.split(",")]
    if args.no_ray:
        async def run_all() -> None:
            server = InferenceServer(args.game, net, config, None, "bench")
            print(f"\nserver device: {server.device}{header}")
            for n in counts:
                print_row(await bench_coroutine_clients(server, args, n))
            server.close()

        asyncio.run(run_all())
        return
    import ray

    ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    try:
        server = make_inference_actor(args.game, net, config, None, "bench")
        ray.get(server.ready.remote())
        print(header)
        for n in counts:
            print_row(bench_ray_clients(server, args, n))
    finally:
        ray.shutdown()


def print_row(r: dict) -> None:
    print(f"| {r['clients']} | {r['calls']} | {r['positions_per_call']:.1f} | "
          f"{r['fill']:.3f} | {r['requests_per_call']:.2f} | {r['wait_ms']:.2f} | "
          f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['evals_per_s']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
