"""The load simulator on the multi-host bed (``tests/netbed``, as root): N virtual
self-play workers in the worker nodes' network namespaces, run by a real ``zeroforge
train`` on the bed's ``head``.

    python benchmarks/scale_sim_bed.py --workers 1000 --minutes 3

As ``scale_sim.py``, but across real network interfaces: the bed's Ray cluster (``head``
with the learner, ``node1`` and ``node2`` with the self-play slots), its redis-server (the
run's Redis: weights, pace, heartbeats) and a second redis-server on the ``redis`` host
holding the two stream shards, so the run's Redis carries the weights alone. The workers
(``selfplay.simulate_from``: recorded tic-tac-toe games replayed at ``--games-per-min``
(2 a minute: the learner, which trains on them, shares the bed's cores with the workers),
weights polled every 2 s through each node's weight cache) are hosted N / 2 to an actor,
one actor per node (``--workers-per-host``: 0 for node hosts, 1 for an actor a worker);
the learner trains on what they send and publishes ``--net`` weights every
``--publish-every-steps`` steps. Measured over the timed phase: the run's Redis bytes out
per publish (in blobs: about one per node with the cache), where the workers' weights came
from, the delivery time (exact: ``selfplay.simulate_deliveries_dir``), games lost (the
auditors' ledger: must be 0), the controller's and the driver's CPU, the dashboard's
``/api/status`` latency. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from scale_sim import (  # noqa: E402
    delivery_quantiles,
    median_ms,
    process_cpu_s,
    record_games,
)

from benchmarks.record import print_and_keep  # noqa: E402

STREAM_PORT_OFFSET = 3
"""The stream shards' redis-server listens on the bed's Redis port + this."""


def _metric_lines(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """``(labels, value)`` of each sample of ``zeroforge_<name>`` in a Prometheus text."""
    out = []
    for line in text.splitlines():
        m = re.match(rf"^zeroforge_{name}(?:\{{(.*)\}})? (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m[1] or ""))
            out.append((labels, float(m[2])))
    return out


def _controller_pid(bed) -> int:
    """The run's controller: the ``ray::Controller`` process in the bed's head namespace
    (this bed's, never another run's on the machine)."""
    from tests.netbed import namespace_pids

    for pid in namespace_pids(bed.ns("head")):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::Controller"):
                return pid
        except OSError:
            continue
    raise RuntimeError("no controller process in the bed's head namespace")


def simulate_on_bed(bed, start_run, work_dir: Path, workers: int, minutes: float, *,
                    games_per_min: float = 2.0, net: str = "small",
                    publish_every_steps: int = 200, record: int = 32,
                    seed: int = 0, workers_per_host: int | None = None) -> dict:
    """One simulated run on ``bed`` (``start_run``: the multihost suite's, or one over
    ``BedRun``); returns the JSON document. ``workers_per_host``: None, half the workers
    an actor (an actor a node); 0, node hosts (the default of a run); 1, an actor a
    worker (the bed's nodes need a ``worker_slots`` unit for each)."""
    from zeroforge.actors.replay_worker import save_games
    from zeroforge.shared.transport import connect

    per_host = -(-workers // 2) if workers_per_host is None else workers_per_host
    games_file = work_dir / "games.msgpack"
    save_games(games_file, record_games("tictactoe", record, seed))
    deliveries = work_dir / "deliveries"
    deliveries.mkdir()
    main_port = bed.config.redis_port
    port = main_port + STREAM_PORT_OFFSET
    streams = bed.start_redis(port)
    run = None
    try:
        run = start_run(
            f"selfplay.workers={workers}", f"distributed.workers_per_host={per_host}",
            f"selfplay.simulate_from={games_file}",
            f"selfplay.simulate_deliveries_dir={deliveries}",
            f"selfplay.simulate_games_per_min={games_per_min}", f"net={net}",
            f"learner.publish_every_steps={publish_every_steps}",
            "learner.min_replay=500", "learner.batch_size=64", "learner.checkpoint_every_s=5",
            "run.minutes=0",  # the preset's 3 minutes would end the run mid-measurement
            "distributed.stream_shards=2",
            f'distributed.stream_redis=["redis://redis:{port}/0"]',
            shards=((port, 0), (port, 1)))
        st = run.status_when(lambda s: s["alive"]["selfplay"] == workers
                             and s["weights_version"] >= 2, 600, f"{workers} workers up")
        nodes = sorted({r["ip"] for r in st["actors"] if r["kind"] == "selfplay"})
        hosts = sum(r["kind"] == "selfplay" for r in st["actors"])
        dashboard = next(m[1] for line in run.lines
                         if (m := re.search(r"dashboard at (http://\S+)", line)))
        url = bed.admin_url(main_port)
        redis = bed.call_in("redis", lambda: connect(url))

        def bytes_out() -> int:
            return int(bed.call_in("redis", lambda: redis.info("stats"))[
                "total_net_output_bytes"])

        controller, driver = _controller_pid(bed), run.proc.pid
        began = time.time()
        out0, v0 = bytes_out(), st["weights_version"]
        cpu0 = (process_cpu_s(controller), process_cpu_s(driver))
        api_s = []
        while time.time() < began + minutes * 60:
            time.sleep(5)
            t0 = time.perf_counter()
            bed.call_in("head", lambda: urllib.request.urlopen(
                f"{dashboard}api/status", timeout=30).read())
            api_s.append(time.perf_counter() - t0)
        st = run.status()
        out1, v1 = bytes_out(), st["weights_version"]
        wall = time.time() - began
        cpu = (process_cpu_s(controller) - cpu0[0], process_cpu_s(driver) - cpu0[1])
        text = bed.call_in("head", lambda: urllib.request.urlopen(
            st["metrics_url"], timeout=30).read().decode())
        blob = bed.call_in("redis", lambda: redis.hget(
            f"zf:{{{run.run_id}}}:weights:{int(v1)}:meta", "size"))
        stop_said = run.stop()
        ledger = run.ledger()
        driver_tail = [line.rstrip() for line in run.lines[-6:]]
    except BaseException:
        if run is not None:  # what the driver said, for the failure's reader
            print("".join(run.lines[-40:]), file=sys.stderr)
        raise
    finally:
        streams.kill()
        streams.wait(10)
    fetches: dict[str, float] = {}
    for labels, v in _metric_lines(text, "weights_fetches_total"):
        fetches[labels["source"]] = fetches.get(labels["source"], 0.0) + v
    publishes = int(v1 - v0)
    blob_bytes = int(blob) if blob else 0
    per_publish = (out1 - out0) / max(publishes, 1)
    return {
        "workers": workers, "nodes": len(nodes), "hosts": hosts,
        "workers_per_host": per_host, "minutes": minutes, "net": net,
        "games_per_min_per_worker": games_per_min,
        "games_appended": len(ledger.appended), "games_received": ledger.games_received,
        "lost_games": sum(not o.startswith("trained once")
                          for o in ledger.outcomes().values()),
        "ledger_problems": ledger.problems(),
        "publishes": publishes, "blob_bytes": blob_bytes,
        "redis_bytes_per_publish": round(per_publish),
        "redis_bytes_per_publish_in_blobs": round(per_publish / max(blob_bytes, 1), 2),
        "weight_fetches": {k: int(v) for k, v in fetches.items()},
        **delivery_quantiles(deliveries, began),
        "controller_cores": round((cpu[0] + cpu[1]) / wall, 3),
        "controller_only_cores": round(cpu[0] / wall, 3),
        "driver_cores": round(cpu[1] / wall, 3),
        "api_status_ms_p50": median_ms(api_s),
        "api_status_ms_max": round(max(api_s) * 1000, 1) if api_s else None,
        "wall_s": round(wall, 1),
        "stop_said": stop_said.strip().splitlines()[-3:],
        "driver_tail": driver_tail,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=1000)
    p.add_argument("--minutes", type=float, default=3.0)
    p.add_argument("--games-per-min", type=float, default=2.0,
                   help="per virtual worker (the bed's learner shares a core)")
    p.add_argument("--net", default="small", help="the learner's net (its blob)")
    p.add_argument("--publish-every-steps", type=int, default=200,
                   help="every ~10 s here; at ~2 s a publish often races the workers' polls")
    p.add_argument("--workers-per-host", type=int, default=None,
                   help="0: node hosts (a run's default); 1: an actor a worker; default: "
                        "half the workers an actor")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the document here")
    args = p.parse_args(argv)
    import uuid

    from tests.multihost.bed_run import BedRun
    from tests.netbed import Bed, BedConfig

    with tempfile.TemporaryDirectory(prefix="zf-bedsim-") as tmp, \
            Bed(BedConfig(worker_slots=max(3, args.workers // 2 + 1))) as bed:
        runs: list[BedRun] = []

        def start_run(*settings: str, shards: tuple = ()) -> BedRun:
            run_id = f"bedsim-{uuid.uuid4().hex[:8]}"
            runs.append(BedRun(bed, Path(tmp) / run_id, run_id, *settings, shards=shards))
            return runs[-1]

        try:
            doc = simulate_on_bed(bed, start_run, Path(tmp), args.workers, args.minutes,
                                  games_per_min=args.games_per_min, net=args.net,
                                  publish_every_steps=args.publish_every_steps,
                                  seed=args.seed, workers_per_host=args.workers_per_host)
        finally:
            for run in runs:
                run.close()
    doc["machine_cores"] = os.cpu_count()
    print_and_keep(doc, args.json)
    return 0 if doc["lost_games"] == 0 and not doc["ledger_problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
