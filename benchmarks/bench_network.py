"""What crossing a network costs a distributed run: the netns bed (``tests/netbed``) with
the run's Redis traffic direct, through the delaying relay at 0 ms (the relay's own cost),
and at added latencies (each way, so a round trip gains twice that).

Each row is a fresh run on one bed: ``zeroforge train`` on ``head``, two self-play workers
(one on each node), the learner on ``head``, Redis on ``redis``. After a warm-up, the
run's counters (``zeroforge status --json``) are read at the start and end of a window:
self-play games/s and positions/s (samples produced), the learner's games received/s and
steps/s; and the stream backlog at the end. Needs root (the bed).

    python benchmarks/bench_network.py [--delays 0,20,50] [--warmup 30] [--seconds 60]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.netbed import Bed, BedConfig

ZEROFORGE = str(Path(sys.executable).with_name("zeroforge"))
SETTINGS = [
    "net=tiny", "search.num_simulations=16", "selfplay.games_in_parallel=8",
    "learner.min_replay=64", "learner.batch_size=32", "learner.publish_every_steps=5",
    "learner.checkpoint_every_s=5", "run.progress_every_s=5", "distributed.evaluator=false",
    "distributed.inference=local", "selfplay.workers=2",
    "distributed.worker_cpus=0", "distributed.learner_cpus=1",
    "distributed.worker_resource=zf_selfplay", "distributed.worker_spread=true",
]


def status(bed: Bed, run_id: str) -> dict:
    r = bed.run("head", [ZEROFORGE, "status", "--json", "--run-id", run_id, "--address",
                         bed.ray_address])
    if r.returncode != 0:
        raise RuntimeError(f"status: {r.stderr.strip()[-500:]}")
    return dict(json.loads(r.stdout))


def measure(bed: Bed, url: str, config: str, warmup: float, seconds: float) -> dict:
    run_id = f"bench-net-{uuid.uuid4().hex[:8]}"
    run_dir = bed.dir / run_id
    sets = [a for s in SETTINGS for a in ("--set", s)]
    proc = bed.popen("head", [ZEROFORGE, "train", "--config", config, "--address",
                              bed.ray_address, "--redis-url", url, "--run-dir", str(run_dir),
                              "--run-id", run_id, *sets], log=bed.dir / f"{run_id}.log")
    try:
        deadline = time.monotonic() + 300
        while True:  # both workers playing and the learner training
            time.sleep(2)
            try:
                st = status(bed, run_id)
            except RuntimeError:
                st = {}
            if st.get("alive", {}).get("selfplay") == 2 and st.get("learner_steps", 0) > 0:
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"run {run_id} did not start; see {run_dir}")
        time.sleep(warmup)
        a, t0 = status(bed, run_id), time.monotonic()
        time.sleep(seconds)
        b, t1 = status(bed, run_id), time.monotonic()
        dt = t1 - t0
        return {k: (b[k] - a[k]) / dt for k in ("games", "positions", "games_received",
                                                 "learner_steps")} | {
            "backlog": b["stream_lag"], "nodes": sorted({r["ip"] for r in b["actors"]})}
    finally:
        bed.run("head", [ZEROFORGE, "stop", "--run-id", run_id, "--address",
                         bed.ray_address], timeout=180)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="tictactoe")
    parser.add_argument("--delays", default="0,20,50",
                        help="added latency each way, ms (0: the relay without delay)")
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=2,
                        help="rounds over all paths (interleaved; the table has medians)")
    args = parser.parse_args()
    rows: dict[str, list[dict]] = collections.defaultdict(list)
    with Bed(BedConfig(worker_slots=2)) as bed:
        direct = f"redis://redis:{bed.config.redis_port}/0"
        plan: list[tuple[str, str, float | None]] = [("direct", direct, None)]
        plan += [(f"relay +{d:g} ms", f"redis://redis:{bed.config.relay_port}/0", d)
                 for d in (float(x) for x in args.delays.split(","))]
        for _ in range(args.repeat):
            for label, url, delay in plan:
                relay = bed.start_relay(delay) if delay is not None else None
                try:
                    port = int(url.rsplit(":", 1)[1].split("/")[0])
                    rtt = bed.redis_rtt(port)
                    row = measure(bed, url, args.config, args.warmup, args.seconds)
                finally:
                    if relay is not None:
                        relay.kill()
                        relay.wait(10)
                row |= {"rtt_ms": 1000 * rtt, "load": os.getloadavg()[0]}
                rows[label].append(row)
                print(f"{label}: {row}", flush=True)
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {args.config}, 2 workers (node1, node2), learner "
          f"on head, warm-up {args.warmup:g} s, window {args.seconds:g} s, medians of "
          f"{args.repeat}\n")

    def med(label: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[label])

    base = med("direct", "games") or 1.0
    print("| Redis path | PING round trip | self-play games/s | positions/s | "
          "learner games/s | learner steps/s | games vs direct | load (1 min) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label in rows:
        loads = ", ".join(f"{r['load']:.1f}" for r in rows[label])
        print(f"| {label} | {med(label, 'rtt_ms'):.2f} ms | {med(label, 'games'):.1f} | "
              f"{med(label, 'positions'):.0f} | {med(label, 'games_received'):.1f} | "
              f"{med(label, 'learner_steps'):.1f} | "
              f"{100 * med(label, 'games') / base:.0f}% | {loads} |")


if __name__ == "__main__":
    main()
