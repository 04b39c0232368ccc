"""The control plane at ten thousand workers, without ten thousand processes.

    python benchmarks/control_plane.py --slots 10000 --nodes 300
    python benchmarks/control_plane.py --slots 1000 10000 --workers-per-host 1

Runs the real controller (``deploy.ray.controller.Controller``: its monitor tick, its
state for the driver, its status) with Ray replaced at its one seam
(``deploy.ray.ray_calls``) by an in-process fake cluster: ``--nodes`` simulated nodes and
the run's actors on them, each answering ``stats`` with a snapshot shaped like a real
self-play worker's (every metric a worker records, its labels filled in), hosts of several
workers merged by the real ``WorkerHost``. What the fake answers is prepared outside the
timings: on a real cluster the actors compute their replies on their own nodes.

Prints one JSON document: a row per (slots, workers per host) with ``slots``, ``nodes``,
``hosts`` (self-play actors), ``state_bytes`` (``controller_state()`` as stored, what the
driver fetches every half second), ``tick_ms`` (p50 and max over ``--ticks`` ticks),
``status_ms`` (p50), ``gcs_calls_per_tick`` (queries of the cluster's central tables:
actor states, resources, named actors), ``ray_calls_per_tick`` (calls on actors, waits
and gets) and ``redis_clients`` (connections the run's self-play opens to its Redis and
stream shards).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.fake_cluster import simulated_run  # noqa: E402
from benchmarks.record import print_and_keep  # noqa: E402


def measure(slots: int, nodes: int, per_host: int, ticks: int) -> dict:
    """One row: a run of ``slots`` workers, ``per_host`` to an actor, on ``nodes`` nodes."""
    from zeroforge.shared.transport import encode_control_state

    with simulated_run(slots, nodes, per_host, run_id=f"cp{slots}-{per_host}") as (
            controller, fake):
        tick_s, gcs, calls, status_s = [], [], [], []
        for _ in range(ticks):
            before = dict(fake.counts)
            began = time.perf_counter()
            controller.tick()
            tick_s.append(time.perf_counter() - began)
            gcs.append(fake.counts["gcs"] - before["gcs"])
            calls.append(sum(fake.counts[k] - before[k] for k in ("actor_calls", "waits",
                                                                    "gets")))
            began = time.perf_counter()
            controller.status()
            status_s.append(time.perf_counter() - began)
        state = controller.controller_state()
        state_bytes = len(encode_control_state(state))
        parts = {k: len(encode_control_state({k: v})) for k, v in state.items()}
        hosts = len(fake.selfplay())
    return {"slots": slots, "nodes": nodes, "workers_per_host": per_host, "hosts": hosts,
            "state_bytes": state_bytes,
            "state_largest_parts": dict(sorted(parts.items(), key=lambda kv: -kv[1])[:4]),
            "tick_ms": {"p50": round(statistics.median(tick_s) * 1000, 1),
                        "max": round(max(tick_s) * 1000, 1)},
            "status_ms": round(statistics.median(status_s) * 1000, 1),
            "gcs_calls_per_tick": statistics.median(gcs),
            "ray_calls_per_tick": statistics.median(calls),
            "redis_clients": redis_clients(controller.config, slots, hosts)}


def redis_clients(config, slots: int, hosts: int) -> int:
    """The most connections the run's self-play holds to its Redis servers: a host's one
    shared transport is bounded per server (``host_connection_bounds``; process workers
    relay through it); one worker an actor is one thread, one connection a server."""
    from zeroforge.shared.transport import host_connection_bounds

    d = config.distributed
    urls = [f"stream{i}" for i in range(len(d.stream_redis) + d.stream_servers)] or ["run"]
    if d.workers_per_host == 1:
        return slots * len(dict.fromkeys(["run", *urls]))
    return hosts * sum(host_connection_bounds("run", d.stream_shards, urls).values())


def main(argv: list[str] | None = None) -> int:
    from benchmarks.machine import machine_line

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slots", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--nodes", type=int, default=300)
    p.add_argument("--workers-per-host", type=int, nargs="+", default=[0],
                   help="0: node hosts (distributed.workers_per_host=0: a host a node)")
    p.add_argument("--ticks", type=int, default=20)
    p.add_argument("--json", default=None, help="also write the document here")
    args = p.parse_args(argv)
    rows = []
    for per in args.workers_per_host:
        for slots in args.slots:
            rows.append(measure(slots, args.nodes, per, args.ticks))
            print(json.dumps(rows[-1]), file=sys.stderr)
    doc = {"machine": machine_line(), "rows": rows}
    print_and_keep(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
