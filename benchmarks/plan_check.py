"""The capacity model checked against what it was not fed: ``zeroforge plan --measure``
predicts a real distributed run on this machine (which part saturates first, its rate),
then the run is made and measured.

    python benchmarks/plan_check.py --runs learner stream --seeds 1 2 --json out.json

For each run and seed: ``zeroforge plan --measure --json`` (a subprocess, on the machine
as the run will find it, before anything of the run starts) and the prediction printed;
then the run (``start_run`` on a local Ray cluster, as ``zeroforge train`` starts one) and
its rates over a timed window after a warm-up, from the run's own counters. Nothing
measured during a run goes into its prediction.

- ``learner``: the gomoku8 preset with one self-play worker, learner-bound by
  ``samples_per_insert`` (the worker waits for the learner). One worker, so the learner
  (one torch thread) has a core of the two while the worker plays; ``plan --measure``
  times a replica with the other core idle, the condition the run gives it.
- ``stream``: the one stream shard's Redis in a network namespace, the link into it held
  to ``--shard-rate`` bytes/s (``tc tbf`` on the root side of a veth pair: the bytes the
  shard takes in, the plan's ``--shard-mb-s``); two fast workers (tiny net, 16
  simulations) offer several times that; the learner only takes in (it never trains).
  Needs root and iproute2.

Prints, then writes with ``--json``, one document: per run the plan's figures, the
predicted saturating part and rate, the measured rates, measured / predicted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.record import print_and_keep  # noqa: E402

RUNS = {
    "learner": ["selfplay.workers=1", "run.torch_threads=1", "distributed.inference=local"],
    "learner-preset": ["run.torch_threads=1", "distributed.inference=local"],
    "stream": ["selfplay.workers=2", "run.torch_threads=1", "distributed.inference=local",
               "net=tiny", "search.num_simulations=16", "learner.samples_per_insert=0",
               "learner.replay_capacity=150000", "learner.min_replay=150001"],
}
"""The gomoku8 preset's overrides of each run (chosen before any measured run).
``learner-preset``: the preset's own two workers, the learner's core not arranged."""
NS, HOST_IF, NS_IF = "zfpcheck", "zfpch0", "zfpch1"
HOST_IP, NS_IP, NS_PORT = "10.231.77.1", "10.231.77.2", 6391
TOLERANCE = 0.25
"""Measured within this fraction of predicted counts as a match."""


def plan(sets: list[str], workers: int, shard_mb_s: float | None) -> dict:
    """``zeroforge plan --config gomoku8 ... --measure --json`` as a subprocess."""
    argv = [sys.executable, "-m", "zeroforge", "plan", "--config", "gomoku8",
            *(a for s in sets for a in ("--set", s)), "--workers", str(workers),
            "--nodes", "1", "--measure", "--json"]
    if shard_mb_s is not None:
        argv += ["--shard-mb-s", str(shard_mb_s)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def predict(plan_doc: dict, batch_size: int, samples_per_insert: float) -> dict:
    """The plan's saturating part (where nothing saturates, the most loaded one), the rate
    the plan gives it (one unit's capacity, or its demand below that), and the
    positions/s taken in that implies."""
    part = plan_doc["saturates_first"] or max(plan_doc["parts"], key=lambda r: r["load"])["part"]
    row = next(r for r in plan_doc["parts"] if r["part"] == part)
    rate = min(row["demand"], row["per_unit"])
    # the plan's own intake (deploy/plan.py ``intake``: a learner-bound run at the pace's
    # floor); plans written before it had none: batch / samples_per_insert a step
    positions = plan_doc.get("intake", {}).get("positions_per_s")
    if positions is None and part == "learner steps":
        positions = rate * batch_size / samples_per_insert
    elif positions is None and part == "sample intake":
        positions = rate / plan_doc["figures"]["bytes_per_position"]
    elif positions is None:
        raise ValueError(f"no positions/s prediction for {part!r}")
    return {"part": part, "unit": row["unit"], "rate": rate, "load": row["load"],
            "saturates": plan_doc["saturates_first"] is not None,
            "positions_per_s": positions}


def rates(before: dict, after: dict, seconds: float, workers: int) -> dict:
    """The run's rates between two merged snapshots ``seconds`` apart."""
    from zeroforge.shared.metrics import total

    def rate(name: str, **labels: str) -> float:
        return (total(after, name, **labels) - total(before, name, **labels)) / seconds

    return {"learner_steps_per_s": rate("learner_steps_total"),
            "positions_received_per_s": rate("learner_positions_received_total"),
            "positions_offered_per_s": rate("selfplay_positions_total", worker_kind="selfplay"),
            "worker_throttled_share": rate("selfplay_throttled_seconds_total",
                                           worker_kind="selfplay") / workers,
            "learner_throttled_share": rate("learner_throttled_seconds_total"),
            "samples_per_insert": total(after, "learner_samples_per_insert")}


def compare(predicted: float, measured: float) -> dict:
    ratio = measured / predicted if predicted else float("nan")
    return {"predicted": round(predicted, 3), "measured": round(measured, 3),
            "ratio": round(ratio, 3), "within_25pct": abs(ratio - 1) <= TOLERANCE}


def busy_jiffies() -> int:
    """Busy CPU time of the whole machine so far (``/proc/stat``, clock ticks)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(v) - v[3] - v[4]


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, check=check, capture_output=True, text=True).stdout


@contextlib.contextmanager
def shard_netns():
    """A network namespace joined to this one by a veth pair (no throttle yet)."""
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "netns", "add", NS)
    try:
        sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF, "netns", NS)
        sh("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
        sh("ip", "link", "set", HOST_IF, "up")
        sh("ip", "-n", NS, "addr", "add", f"{NS_IP}/30", "dev", NS_IF)
        sh("ip", "-n", NS, "link", "set", NS_IF, "up")
        sh("ip", "-n", NS, "link", "set", "lo", "up")
        yield
    finally:
        sh("ip", "link", "del", HOST_IF, check=False)
        sh("ip", "netns", "del", NS, check=False)


def throttle(rate_bytes: float | None) -> None:
    """Hold the link into the namespace (the shard's intake) to ``rate_bytes``/s; None
    lifts it. The queue holds about 3 s at the rate: no drops from a few appends."""
    if rate_bytes is None:
        sh("tc", "qdisc", "del", "dev", HOST_IF, "root", check=False)
        return
    sh("tc", "qdisc", "replace", "dev", HOST_IF, "root", "tbf", "rate",
       f"{int(rate_bytes * 8)}bit", "burst", "4096", "limit", str(int(rate_bytes * 3)))


def link_sent() -> tuple[int, int]:
    """(bytes, packets dropped) the throttled link has sent so far (``tc -s``)."""
    words = sh("tc", "-s", "qdisc", "show", "dev", HOST_IF).replace(",", " ").split()
    i = words.index("Sent")
    return int(words[i + 1]), int(words[words.index("(dropped") + 1])


def shard_server(tmp: Path):
    """The shard's Redis, run inside the namespace (a wrapper as its binary)."""
    from zeroforge.shared.transport import RedisServer, RedisServerConfig, find_binary

    wrapper = tmp / "redis-in-ns"
    wrapper.write_text(f'#!/bin/sh\nexec ip netns exec {NS} {find_binary()} "$@"\n')
    wrapper.chmod(0o755)
    return RedisServer(RedisServerConfig(host=NS_IP, port=NS_PORT, binary=str(wrapper),
                                         appendonly=False)).start()


def real_run(kind: str, sets: list[str], seed: int, warmup_s: float, window_s: float,
             shard_rate: float | None) -> dict:
    """Start the run, wait for its first training step (or game in), warm up, measure."""
    import ray

    from zeroforge.deploy.config import load_train_config
    from zeroforge.deploy.ray.cluster import init_local
    from zeroforge.deploy.ray.handle import start_run
    from zeroforge.shared import metrics
    from zeroforge.shared.transport import RedisServer, connect

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zf-check-")))
        config = load_train_config("gomoku8", [*sets, f"run.seed={seed}",
                                               f"run.run_dir={tmp}/run"])
        run = stack.enter_context(RedisServer())
        ctx = dataclasses.replace(config.context(f"check-{kind}-{seed}", run.url),
                                  run_dir=f"{tmp}/run")
        shard = None
        if shard_rate is not None:
            stack.enter_context(shard_netns())
            shard = stack.enter_context(shard_server(tmp))
            ctx = dataclasses.replace(ctx, stream_urls=(shard.url,))
            throttle(shard_rate)
            stack.callback(throttle, None)
        init_local()
        stack.callback(ray.shutdown)
        handle = start_run(config, ctx)
        stack.callback(handle.shutdown)
        stop = threading.Event()
        stack.callback(stop.set)

        def drive() -> None:  # the driver's keep-alive, as in ``zeroforge train``
            while not stop.wait(0.5):
                with contextlib.suppress(Exception):
                    handle.keep_alive()

        threading.Thread(target=drive, daemon=True).start()

        def snap() -> dict:
            return metrics.merge([handle.metrics_snapshot()])

        first = "learner_steps_total" if kind.startswith("learner") else \
            "learner_positions_received_total"
        started, deadline = time.time(), time.monotonic() + 600
        while metrics.total(snap(), first) <= 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{kind} run: no {first} in 600 s")
            time.sleep(2.0)
        first_at = time.time() - started
        time.sleep(warmup_s)
        redis = connect(shard.url if shard is not None else run.url)
        link = link_sent() if shard is not None else (0, 0)
        before, t0, busy0 = snap(), time.time(), busy_jiffies()
        bytes0 = int(redis.info("stats")["total_net_input_bytes"])
        load0 = os.getloadavg()[0]
        time.sleep(window_s)
        after, seconds = snap(), time.time() - t0
        bytes_in = (int(redis.info("stats")["total_net_input_bytes"]) - bytes0) / seconds
        busy = (busy_jiffies() - busy0) / os.sysconf("SC_CLK_TCK") / seconds
        link_after = link_sent() if shard is not None else (0, 0)
        out = {**rates(before, after, seconds, config.selfplay.workers),
               "redis_bytes_in_per_s": bytes_in,
               "busy_cores": busy, "load_1min_start_end": [load0, os.getloadavg()[0]],
               "first_step_or_game_after_s": round(first_at, 1),
               "window_s": round(seconds, 1)}
        if shard is not None:
            out["link_bytes_per_s"] = (link_after[0] - link[0]) / seconds
            out["link_dropped_packets"] = link_after[1] - link[1]
        if shard is not None:
            throttle(None)  # the final drain is not held up
        final = handle.stop().to_json()
        out["final_state"] = final["state"]
        return out


def check(kind: str, seed: int, args: argparse.Namespace) -> dict:
    from benchmarks.machine import machine_line
    from zeroforge.deploy.config import load_train_config

    sets = RUNS[kind]
    config = load_train_config("gomoku8", sets)
    rate = args.shard_rate if kind == "stream" else None
    began = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    machine = machine_line()  # before the plan: the load the plan measured under
    plan_doc = plan(sets, config.selfplay.workers, rate / 1e6 if rate else None)
    c = config.learner
    pred = predict(plan_doc, c.batch_size, c.samples_per_insert)
    print(f"[{kind} seed {seed}] plan: {json.dumps(plan_doc['figures'])}", file=sys.stderr)
    print(f"[{kind} seed {seed}] predicted: {pred['part']} saturates first at "
          f"{pred['rate']:,.2f} {pred['unit']} (load {pred['load']:.2f}), "
          f"{pred['positions_per_s']:,.1f} positions/s taken in", file=sys.stderr, flush=True)
    start = time.monotonic()
    measured = real_run(kind, sets, seed, args.warmup_s, args.window_s, rate)
    if pred["part"] == "learner steps":
        part = compare(pred["rate"], measured["learner_steps_per_s"])
    else:
        part = compare(pred["rate"], measured["positions_received_per_s"]
                       * plan_doc["figures"]["bytes_per_position"])
    doc = {"run": kind, "seed": seed, "started": began, "machine": machine,
           "config": "gomoku8", "sets": sets,
           "shard_rate_bytes_per_s": rate, "plan_figures": plan_doc["figures"],
           "plan_parts": plan_doc["parts"], "predicted": pred, "measured": measured,
           "saturating_part": {"part": pred["part"], "unit": pred["unit"], **part},
           "positions_per_s_taken_in": compare(pred["positions_per_s"],
                                               measured["positions_received_per_s"]),
           "duration_s": round(time.monotonic() - start, 1)}
    if pred["part"] == "learner steps":  # the pace's floor (docs/architecture.md)
        floor = c.samples_per_insert * (1 - c.samples_per_insert_tolerance)
        doc["positions_per_s_at_pace_floor"] = compare(
            pred["rate"] * c.batch_size / floor, measured["positions_received_per_s"])
    print(f"[{kind} seed {seed}] measured: {json.dumps(doc['saturating_part'])}",
          file=sys.stderr, flush=True)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", choices=sorted(RUNS), default=["learner", "stream"])
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--warmup-s", type=float, default=60.0,
                   help="after the first learner step (learner) or game in (stream)")
    p.add_argument("--window-s", type=float, default=150.0)
    p.add_argument("--shard-rate", type=float, default=40_000.0,
                   help="bytes/s the stream shard's link takes in (the stream run)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    docs = [check(kind, seed, args) for seed in args.seeds for kind in args.runs]
    out = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "runs": docs}
    print_and_keep(out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
