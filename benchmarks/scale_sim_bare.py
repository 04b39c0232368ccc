"""Transport-only load simulator: N virtual self-play workers against the real Redis,
stream shards, weight store (with or without the per-node cache) and learner service, with
no Ray and no controller (``scale_sim.py`` runs them under the real controller).

    python benchmarks/scale_sim_bare.py --workers 1000 --minutes 3
    python benchmarks/scale_sim_bare.py --workers 100 --minutes 1 --shards 1 --no-node-cache

Each virtual worker has its own worker id, its own transport (Redis connections, sample
stream endpoint, weight source over its virtual node's cache directory) and its own
counters, and replays real recorded games (tiny-net self-play of the game, valid under
the learner's intake checks) under fresh game ids at ``--games-per-min`` a worker, while
it polls for new weights every ``--poll-s`` as a self-play worker does between moves (the
blob is fetched and verified, not decoded into a net: the simulator spends its CPU on the
transport, not on torch). Workers are spread over ``--processes`` processes, an asyncio
loop in each (blocking transport calls go through a thread pool), and over ``--nodes``
virtual nodes (a cache directory each).

The learner is the real ``LearnerService`` over all shards, with training off (its window
never fills: the simulator measures intake, not SGD); a publisher thread publishes a
``--net`` weights blob every ``--publish-every-s`` as the learner would. Streams live on
``--stream-servers`` Redis servers of their own, so the run's Redis carries the weights
(and their polls) alone and its bytes out per publish are the weights' fan-out.

Prints one JSON document: positions/s offered and received, games lost (must be 0) and
duplicates dropped, weight delivery latency (publish -> each virtual worker has it)
p50/p99/max and the time until every worker had a version, Redis bytes out per publish,
the simulator's and learner's CPU. ``controller_cores`` is null here: there is no
controller (``scale_sim.py`` measures it).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale_sim import add_load_options, record_games  # noqa: E402


@dataclasses.dataclass
class Plan:
    """What one simulator process runs (plain data: it crosses a process boundary)."""

    url: str
    stream_urls: list[str]
    run_id: str
    shards: int
    first: int
    count: int
    nodes: int
    cache_root: str
    node_cache: bool
    games: list[bytes]
    games_per_min: float
    poll_s: float
    seconds: float
    threads: int


@dataclasses.dataclass
class Virtual:
    """One virtual worker's endpoints and state."""

    index: int
    transport: object
    sink: object
    weights: object
    store: object
    have: int = -1


async def connect_worker(index: int, plan: Plan, pool) -> Virtual:
    """Open a virtual worker's transport and take the weights already published (as a
    worker does at its start), before the timed phase."""
    from zeroforge.shared.transport import node_cache_dir, open_transport

    loop = asyncio.get_running_loop()
    node = f"node{index % plan.nodes}"
    cache = str(node_cache_dir(plan.cache_root, plan.run_id, node)) if plan.node_cache else None
    transport = await loop.run_in_executor(pool, lambda: open_transport(
        plan.url, plan.run_id, plan.shards, plan.stream_urls, cache))
    weights = transport.weights()
    worker = Virtual(index, transport, transport.samples(), weights,
                     weights.store if hasattr(weights, "store") else weights)
    got = await loop.run_in_executor(pool, weights.fetch_bytes, -1)
    worker.have = got[0] if got is not None else -1
    return worker


async def play(worker: Virtual, plan: Plan, pool, out: dict, start: float) -> None:
    """The timed phase: a game every ``60 / games_per_min`` s, a weights poll every
    ``poll_s``, from ``start`` for ``plan.seconds``."""
    from zeroforge.shared.samples import decode
    from zeroforge.shared.transport import TransportError

    loop = asyncio.get_running_loop()
    rng = np.random.default_rng(worker.index)
    interval = 60.0 / plan.games_per_min
    end = start + plan.seconds
    next_game = start + rng.uniform(0, interval)
    next_poll = start + rng.uniform(0, plan.poll_s)
    seq = 0
    template = decode(plan.games[worker.index % len(plan.games)])
    while True:
        now = time.time()
        if now >= end:
            break
        await asyncio.sleep(max(min(next_game, next_poll, end) - now, 0))
        now = time.time()
        if now >= next_poll:
            next_poll = now + plan.poll_s
            try:
                got = await loop.run_in_executor(pool, worker.weights.fetch_bytes,
                                                 worker.have)
                if got is not None:
                    worker.have = got[0]
                    info = await loop.run_in_executor(pool, worker.store.info, got[0])
                    if info is not None:
                        out["latency"].append((got[0], time.time() - info.time))
            except TransportError:
                out["errors"] += 1
        if now >= next_game and now < end:
            next_game += interval
            game = dataclasses.replace(template, game_id=f"v{worker.index}-{seq}",
                                       worker_id=f"v{worker.index}")
            seq += 1
            try:
                await loop.run_in_executor(pool, worker.sink.append, [game])
                out["appended"].append(game.game_id)
                out["positions"] += game.num_positions
            except TransportError:
                out["errors"] += 1


def run_process(plan: Plan, results, go, start) -> None:
    """One simulator process: ``plan.count`` virtual workers on one asyncio loop. Says
    ``ready`` once every worker is connected and has the first weights, then waits for
    ``go`` (a shared start time) before the timed phase."""
    out: dict = {"appended": [], "positions": 0, "latency": [], "errors": 0, "fetches": {}}
    pool = concurrent.futures.ThreadPoolExecutor(plan.threads)

    async def connect_all() -> list[Virtual]:
        return list(await asyncio.gather(*(connect_worker(plan.first + i, plan, pool)
                                           for i in range(plan.count))))

    workers = asyncio.run(connect_all())
    results.put("ready")
    go.wait()
    started = time.process_time()

    async def play_all() -> None:
        await asyncio.gather(*(play(w, plan, pool, out, start.value) for w in workers))

    asyncio.run(play_all())
    out["cpu_s"] = time.process_time() - started
    for w in workers:
        for source, n in w.weights.fetch_counts().items():
            out["fetches"][source] = out["fetches"].get(source, 0) + n
        w.transport.close()
    pool.shutdown()
    results.put(out)


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_options(p, processes_help="simulator processes")
    p.add_argument("--nodes", type=int, default=3, help="virtual nodes (cache directories)")
    p.add_argument("--poll-s", type=float, default=2.0, help="weights poll per worker")
    p.add_argument("--threads", type=int, default=32, help="transport threads per process")
    args = p.parse_args(argv)

    sys.path.insert(0, str(HERE.parent))
    import torch

    from benchmarks.record import print_and_keep
    from zeroforge.deploy.config import RunConfig, TrainConfig
    from zeroforge.deploy.runtime.builder import build_learner
    from zeroforge.learner.config import LearnerConfig
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import NetConfig, build_net
    from zeroforge.shared.transport import RedisServer, WeightStore, connect, open_transport

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a connection or two a worker
    torch.set_num_threads(1)
    games = record_games(args.game, args.record, args.seed)
    blob_net = build_net(NetConfig.preset(args.net), make_game(args.game).spec)
    with tempfile.TemporaryDirectory(prefix="zf-scale-") as tmp:
        run = RedisServer().start()
        streams = [RedisServer().start() for _ in range(args.stream_servers)]
        stream_urls = [s.url for s in streams]
        run_id = f"sim-{os.getpid()}"
        try:
            # training off: the window (20,000 positions) never reaches min_replay
            intake_only = LearnerConfig(replay_capacity=20_000, min_replay=20_001,
                                        device="cpu", checkpoint_every_s=30.0)
            config = TrainConfig(game=args.game, net=NetConfig.preset("tiny"),
                                 learner=intake_only,
                                 run=RunConfig(run_dir=tmp, torch_threads=1))
            ctx = dataclasses.replace(config.context(run_id, run.url), run_dir=tmp,
                                      stream_shards=args.shards,
                                      stream_urls=tuple(stream_urls))
            learner = build_learner(config, ctx, open_transport(
                run.url, run_id, args.shards, stream_urls), resume=False)
            stop = threading.Event()
            learner_cpu = threading.Thread(target=learner.run, args=(stop,), daemon=True)
            store = WeightStore(connect(run.url), run_id)
            monitor = connect(run.url)
            seconds = args.minutes * 60
            per = -(-args.workers // args.processes)
            ctxmp = mp.get_context("spawn")
            results = ctxmp.Queue()
            go, start = ctxmp.Event(), ctxmp.Value("d", 0.0)
            procs = []
            for k in range(args.processes):
                first = k * per
                count = min(per, args.workers - first)
                if count <= 0:
                    break
                plan = Plan(run.url, stream_urls, run_id, args.shards, first, count,
                            args.nodes, str(Path(tmp) / "cache"), not args.no_node_cache,
                            games, args.games_per_min, args.poll_s, seconds, args.threads)
                procs.append(ctxmp.Process(target=run_process,
                                           args=(plan, results, go, start)))
            learner_cpu.start()
            for proc in procs:
                proc.start()
            for _ in procs:  # every worker connected, with the weights published so far
                if results.get(timeout=600) != "ready":
                    raise RuntimeError("a simulator process failed to start")
            bytes_before = int(monitor.info("stats")["total_net_output_bytes"])
            cpu_before = time.process_time()
            began = start.value = time.time() + 0.2
            go.set()
            publishes, version = 0, 0
            next_publish = began + args.publish_every_s
            while time.time() < began + seconds:
                time.sleep(max(min(next_publish, began + seconds) - time.time(), 0))
                if time.time() >= next_publish and time.time() < began + seconds:
                    version += 1
                    with torch.no_grad():  # a new blob each time, as training makes
                        next(blob_net.parameters()).add_(0.001)
                    store.publish(blob_net, version)
                    publishes += 1
                    next_publish += args.publish_every_s
            outs = [results.get() for _ in procs]
            for proc in procs:
                proc.join()
            bytes_out = int(monitor.info("stats")["total_net_output_bytes"]) - bytes_before
            stop.set()
            learner_cpu.join(timeout=120)
            main_cpu = time.process_time() - cpu_before
            wall = time.time() - began
            status = learner.status()
            blob_size = store.info(version).size if version else 0
        finally:
            for server in [run, *streams]:
                server.stop()

    appended = [g for o in outs for g in o["appended"]]
    latency = [lat for o in outs for _, lat in o["latency"]]
    by_version: dict[int, list[float]] = {}
    for o in outs:
        for v, lat in o["latency"]:
            by_version.setdefault(v, []).append(lat)
    everyone = [max(lats) for v, lats in by_version.items()
                if v > 0 and len(lats) == args.workers]
    fetches: dict[str, int] = {}
    for o in outs:
        for source, n in o["fetches"].items():
            fetches[source] = fetches.get(source, 0) + n
    from zeroforge.shared.samples import decode

    lengths = [decode(g).num_positions for g in games]
    doc = {
        "workers": args.workers, "processes": len(procs), "nodes": args.nodes,
        "shards": args.shards, "stream_servers": args.stream_servers,
        "node_cache": not args.no_node_cache, "minutes": args.minutes, "game": args.game,
        "games_per_min_per_worker": args.games_per_min, "poll_s": args.poll_s,
        "publish_every_s": args.publish_every_s,
        "positions_per_game": round(float(np.mean([lengths[i % len(lengths)]
                                                   for i in range(args.workers)])), 2),
        "positions_per_s_offered": round(sum(o["positions"] for o in outs) / wall, 1),
        "positions_per_s_received": round(status["positions_received"] / wall, 1),
        "games_appended": len(appended), "games_received": status["games_received"],
        "lost_games": len(set(appended)) - status["games_received"],
        "duplicates_dropped": status["rejected"].get("duplicate", 0),
        "append_errors": sum(o["errors"] for o in outs),
        "publishes": publishes, "blob_bytes": blob_size,
        "redis_bytes_per_publish": round(bytes_out / max(publishes, 1)),
        "redis_bytes_per_publish_in_blobs": round(bytes_out / max(publishes, 1)
                                                  / max(blob_size, 1), 2),
        "weight_fetches": fetches,
        "weights_p50_s": percentile(latency, 50), "weights_p99_s": percentile(latency, 99),
        "weights_max_s": round(max(latency), 3) if latency else None,
        "weights_all_workers_p50_s": percentile(everyone, 50),
        "weights_all_workers_max_s": round(max(everyone), 3) if everyone else None,
        "simulator_cores": round(sum(o["cpu_s"] for o in outs) / wall, 3),
        "learner_and_publisher_cores": round(main_cpu / wall, 3),
        "controller_cores": None,
        "wall_s": round(wall, 1),
    }
    print_and_keep(doc, args.json)
    return 0 if doc["lost_games"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
