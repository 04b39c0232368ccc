"""Load simulator: N virtual self-play workers run by the real controller, against the
real Redis, stream shards, per-node weight cache and learner.

    python benchmarks/scale_sim.py --workers 1000 --minutes 3
    python benchmarks/scale_sim.py --workers 100 --minutes 3

A local Ray cluster, the run's Redis and ``--stream-servers`` Redis servers holding
``--shards`` sample-stream shards; on them a run started as ``zeroforge train`` starts
one (``start_run``): its controller, its learner (intake only: the replay window never
reaches ``min_replay``, the simulator measures the data path, not SGD) and
``selfplay.workers = N`` simulating workers (``selfplay.simulate_from``: real recorded
games replayed under fresh ids at ``--games-per-min`` a worker; weights polled every 2 s,
fetched and verified through the node's weight cache). The workers are hosted
``N / --processes`` to an actor (``distributed.workers_per_host``): to the controller each
is a worker like any other (a status row, its counters, liveness, scale up/down), only
many share a process. This process is the run's driver, as ``zeroforge train`` is: it
fetches the controller's state every 0.5 s (``RunHandle.keep_alive``) and serves the
dashboard from a ``RunMirror``. A publisher process publishes a ``--net`` blob every
``--publish-every-s`` as the learner would.

Prints one JSON document, measured over the timed phase (after every worker is up):
positions/s offered and received, games lost (must be 0) and duplicates dropped,
weights delivery time (publish -> a worker has it, exactly: each worker writes its
deliveries to a file, ``selfplay.simulate_deliveries_dir``; p50/p99/max), Redis bytes
out per publish, the controller's and the driver's CPU (cores) and memory
(``controller_cores`` is the two together), the status call's and the dashboard's
``/api/status`` latency, the ``/metrics`` scrape's time and size.

``scale_sim_bare.py`` is the earlier, transport-only simulator (no Ray, no controller).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def record_games(game_spec: str, count: int, seed: int) -> list[bytes]:
    """``count`` real self-play games of a tiny random net, encoded (the wire format)."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net
    from zeroforge.shared.samples import encode
    from zeroforge.shared.search import SearchConfig

    game = make_game(game_spec)
    evaluator = TorchEvaluator(build_net(NetConfig.preset("tiny"), game.spec), device="cpu")
    worker = SelfPlayWorker(game, evaluator, SearchConfig(num_simulations=4),
                            SelfPlayConfig(games_in_parallel=min(count, 32)), seed=seed,
                            worker_id="rec")
    return [encode(g) for g in worker.play_games(count)[:count]]


def add_load_options(p: argparse.ArgumentParser, processes_help: str) -> None:
    """The options both simulators take (this one and ``scale_sim_bare.py``): the load,
    the streams, the weights, and ``--seed`` / ``--json``."""
    p.add_argument("--workers", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=3.0)
    p.add_argument("--processes", type=int, default=2, help=processes_help)
    p.add_argument("--shards", type=int, default=2, help="sample stream shards")
    p.add_argument("--stream-servers", type=int, default=1)
    p.add_argument("--no-node-cache", action="store_true", help="fetch weights from Redis")
    p.add_argument("--game", default="gomoku:size=8,k=5")
    p.add_argument("--net", default="small", help="net preset of the published blob")
    p.add_argument("--games-per-min", type=float, default=6.0, help="per virtual worker")
    p.add_argument("--publish-every-s", type=float, default=20.0)
    p.add_argument("--record", type=int, default=64, help="real games recorded to replay")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the document here")


def publish_blobs(url: str, run_id: str, game: str, net: str, first_at: float,
                  every_s: float, until: float, done) -> None:
    """The publisher process: a new ``net`` blob every ``every_s`` from ``first_at`` to
    ``until`` (versions 1, 2, ...); puts ``(publishes, blob bytes)`` on ``done``."""
    sys.path.insert(0, str(HERE.parent))
    import torch

    from zeroforge.shared.games import make_game
    from zeroforge.shared.nets import NetConfig, build_net
    from zeroforge.shared.transport import WeightStore, connect

    torch.set_num_threads(1)
    blob_net = build_net(NetConfig.preset(net), make_game(game).spec)
    store = WeightStore(connect(url), run_id)
    version, at = 0, first_at
    while at < until:
        time.sleep(max(at - time.time(), 0))
        version += 1
        with torch.no_grad():  # a new blob each time, as training makes
            next(blob_net.parameters()).add_(0.001)
        store.publish(blob_net, version)
        at += every_s
    info = store.info(version) if version else None
    done.put((version, info.size if info is not None else 0))


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def delivery_quantiles(directory: str | Path, since: float) -> dict[str, float | int | None]:
    """Exact weights delivery times (``selfplay.simulate_deliveries_dir``: a line per
    version a worker took) of the deliveries at or after wall time ``since``: count, p50,
    p99 and max in seconds (None without any)."""
    ages = [float(age) for path in Path(directory).glob("*.tsv")
            for when, _, age in (line.split("\t") for line in path.read_text().splitlines())
            if float(when) >= since]
    if not ages:
        return {"weights_delivered": 0, "weights_p50_s": None, "weights_p99_s": None,
                "weights_max_s": None}
    p50, p99 = np.quantile(ages, [0.5, 0.99])
    return {"weights_delivered": len(ages), "weights_p50_s": round(float(p50), 3),
            "weights_p99_s": round(float(p99), 3), "weights_max_s": round(max(ages), 3)}


def timed_get(url: str) -> tuple[float, int]:
    """Seconds and bytes of one GET."""
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as reply:
        size = len(reply.read())
    return time.perf_counter() - began, size


def median_ms(values: list[float]) -> float | None:
    return round(float(np.median(values)) * 1000, 1) if values else None


WORKER_CPUS = 0.1
"""CPUs a simulating worker books (``distributed.worker_cpus``): it replays, mostly waits."""


def start_cluster(nodes: int, workers: int, worker_cpus: float):
    """``nodes`` simulated nodes on this machine (``ray.cluster_utils.Cluster``: a raylet
    each, Ray's own test cluster), each with the CPUs for its share of the workers, the
    head with one for the learner and the controller; connected. 0: a local node as
    ``zeroforge train`` starts (``init_local``), None returned."""
    from zeroforge.deploy.ray.cluster import init_local

    if not nodes:
        init_local()
        return None
    import math

    import ray
    from ray.cluster_utils import Cluster

    from zeroforge.deploy.ray.naming import NAMESPACE

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    per_node = math.ceil(math.ceil(workers / nodes) * worker_cpus - 1e-9)
    for _ in range(nodes):
        cluster.add_node(num_cpus=per_node)
    ray.init(address=cluster.address, namespace=NAMESPACE, logging_level="ERROR")
    cluster.wait_for_nodes()
    return cluster


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_options(p, processes_help="actors hosting the workers")
    p.add_argument("--probe-every-s", type=float, default=5.0,
                   help="status / dashboard / scrape latency samples")
    p.add_argument("--nodes", type=int, default=10,
                   help="simulated Ray nodes (ray.cluster_utils: a raylet each), the workers "
                        "in node hosts, a host a node (distributed.workers_per_host=0, the "
                        "default); 0: one local node, the workers hosted workers / "
                        "--processes to an actor")
    args = p.parse_args(argv)

    sys.path.insert(0, str(HERE.parent))
    from benchmarks.record import print_and_keep
    from zeroforge.actors.replay_worker import save_games
    from zeroforge.deploy.config import load_train_config
    from zeroforge.deploy.dashboard.mirror import RunMirror
    from zeroforge.deploy.dashboard.run import RunDashboard
    from zeroforge.deploy.ray.handle import start_run
    from zeroforge.shared import metrics
    from zeroforge.shared.transport import RedisServer, connect

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # connections: a few a worker
    per_host = 0 if args.nodes else -(-args.workers // args.processes)
    with tempfile.TemporaryDirectory(prefix="zf-scale-") as tmp:
        games_file = Path(tmp) / "games.msgpack"
        save_games(games_file, record_games(args.game, args.record, args.seed))
        (Path(tmp) / "deliveries").mkdir()
        run = RedisServer().start()
        streams = [RedisServer().start() for _ in range(args.stream_servers)]
        handle = cluster = None
        try:
            settings = [
                f"game={args.game}", "net=tiny", f"selfplay.workers={args.workers}",
                f"distributed.workers_per_host={per_host}",
                f"selfplay.simulate_from={games_file}",
                f"selfplay.simulate_games_per_min={args.games_per_min}",
                f"selfplay.simulate_deliveries_dir={tmp}/deliveries",
                "learner.replay_capacity=20000", "learner.min_replay=20001",
                "learner.checkpoint_every_s=30", "distributed.inference=local",
                f"distributed.worker_cpus={WORKER_CPUS}", "distributed.learner_cpus=0.1",
                "distributed.evaluator=false",
                f"distributed.weights_per_node={str(not args.no_node_cache).lower()}",
                f"run.run_dir={tmp}/run", "run.torch_threads=1"]
            config = load_train_config(None, settings)
            run_id = f"sim-{os.getpid()}"
            ctx = dataclasses.replace(config.context(run_id, run.url), run_dir=f"{tmp}/run",
                                      stream_shards=args.shards,
                                      stream_urls=tuple(s.url for s in streams))
            cluster = start_cluster(args.nodes, args.workers, WORKER_CPUS)
            handle = start_run(config, ctx)
            status = handle.status()
            mirror = RunMirror(lambda: handle, status).start()
            dashboard = RunDashboard(config.run, run_id, f"{tmp}/run", mirror.status,
                                     mirror.merged)
            stop_driving = threading.Event()

            def drive() -> None:  # the driver's loop, as in ``zeroforge train``
                while not stop_driving.wait(0.5):
                    handle.keep_alive()

            driver = threading.Thread(target=drive, daemon=True)
            driver.start()
            up_by = time.monotonic() + 600
            while handle.status_json()["alive"]["selfplay"] < args.workers:
                if time.monotonic() > up_by:
                    raise RuntimeError("the simulating workers did not all come up in 600 s")
                time.sleep(1.0)
            time.sleep(3.0)  # their first polls and games
            hosts = sum(1 for row in handle.status_json()["actors"] if row["kind"] == "selfplay")
            controller = handle.controller_pid()
            redis = connect(run.url)
            seconds = args.minutes * 60
            ctxmp = mp.get_context("spawn")
            done = ctxmp.Queue()
            began = time.time() + 0.5
            publisher = ctxmp.Process(target=publish_blobs, args=(
                run.url, run_id, args.game, args.net, began + args.publish_every_s / 2,
                args.publish_every_s, began + seconds, done))
            publisher.start()
            time.sleep(max(began - time.time(), 0))
            before = metrics.merge([handle.metrics_snapshot()])
            bytes_before = int(redis.info("stats")["total_net_output_bytes"])
            cpu_before = (process_cpu_s(controller), time.process_time())
            status_s, api_s, scrape_s, scrape_bytes = [], [], [], []
            while time.time() < began + seconds:
                time.sleep(min(args.probe_every_s, max(began + seconds - time.time(), 0)))
                t0 = time.perf_counter()
                handle.status_json()
                status_s.append(time.perf_counter() - t0)
                api_s.append(timed_get(f"{dashboard.url}api/status")[0])
                took, size = timed_get(status.metrics_url)
                scrape_s.append(took)
                scrape_bytes.append(size)
            wall = time.time() - began
            cpu = (process_cpu_s(controller) - cpu_before[0],
                   time.process_time() - cpu_before[1])
            bytes_out = int(redis.info("stats")["total_net_output_bytes"]) - bytes_before
            memory = (rss_bytes(controller), rss_bytes(os.getpid()))
            after = metrics.merge([handle.metrics_snapshot()])
            publishes, blob_bytes = done.get(timeout=120)
            publisher.join()
            stop_driving.set()
            driver.join()
            mirror.stop()
            dashboard.close()
            final = handle.stop().to_json()
            merged = metrics.merge([handle.metrics_snapshot()])
            delivered = delivery_quantiles(Path(tmp) / "deliveries", began)
        finally:
            if handle is not None:
                handle.shutdown()
            if cluster is not None:
                import ray

                ray.shutdown()
                cluster.shutdown()
            for server in [run, *streams]:
                server.stop()

    def total(snap: dict, name: str, **labels: str) -> float:
        return metrics.total(snap, name, **labels)

    appended = total(merged, "selfplay_games_total", worker_kind="selfplay")
    received = total(merged, "learner_games_received_total")
    fetches: dict[str, float] = {}
    for labels, v in merged["values"].get("weights_fetches_total", {}).items():
        source = dict(labels)["source"]
        fetches[source] = fetches.get(source, 0.0) + v
    doc = {
        "workers": args.workers, "nodes": args.nodes, "hosts": hosts,
        "processes": args.processes if not args.nodes else None,
        "workers_per_host": per_host,
        "shards": args.shards, "stream_servers": args.stream_servers,
        "node_cache": not args.no_node_cache, "minutes": args.minutes, "game": args.game,
        "games_per_min_per_worker": args.games_per_min,
        "publish_every_s": args.publish_every_s,
        "positions_per_s_offered": round(
            (total(after, "selfplay_positions_total", worker_kind="selfplay")
             - total(before, "selfplay_positions_total", worker_kind="selfplay")) / wall, 1),
        "positions_per_s_received": round(
            (total(after, "learner_positions_received_total")
             - total(before, "learner_positions_received_total")) / wall, 1),
        "games_appended": int(appended), "games_received": int(received),
        "lost_games": int(appended - received),
        "duplicates_dropped": int(total(merged, "rejected_entries_total",
                                        reason="duplicate")),
        "final_state": final["state"], "final_error": final["error"],
        "publishes": publishes, "blob_bytes": blob_bytes,
        "redis_bytes_per_publish": round(bytes_out / max(publishes, 1)),
        "redis_bytes_per_publish_in_blobs": round(bytes_out / max(publishes, 1)
                                                  / max(blob_bytes, 1), 2),
        "weight_fetches": {k: int(v) for k, v in fetches.items()},
        **delivered,
        "controller_cores": round((cpu[0] + cpu[1]) / wall, 3),
        "controller_only_cores": round(cpu[0] / wall, 3),
        "driver_cores": round(cpu[1] / wall, 3),
        "controller_rss_mb": round(memory[0] / 2**20, 1),
        "driver_rss_mb": round(memory[1] / 2**20, 1),
        "status_ms_p50": median_ms(status_s),
        "status_ms_max": round(max(status_s) * 1000, 1) if status_s else None,
        "api_status_ms_p50": median_ms(api_s),
        "api_status_ms_max": round(max(api_s) * 1000, 1) if api_s else None,
        "metrics_scrape_ms_p50": median_ms(scrape_s),
        "metrics_scrape_bytes": max(scrape_bytes) if scrape_bytes else None,
        "machine_cores": os.cpu_count(),
        "wall_s": round(wall, 1),
    }
    print_and_keep(doc, args.json)
    return 0 if doc["lost_games"] == 0 and final["state"] == "stopped" else 1


if __name__ == "__main__":
    sys.exit(main())
