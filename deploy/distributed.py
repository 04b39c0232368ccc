"""The distributed run's driver, and the CLI's way to find a running run.

``zeroforge train`` with no ``--local``: start (or join) Ray, start (or use) Redis, create
the run's Controller as a named actor, print progress until the run ends. ``status``,
``scale`` and ``stop`` attach to the same Ray cluster and talk to that Controller.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TextIO

from deploy.config import TrainConfig
from deploy.controller import NAMESPACE, Controller, controller_name


class RunNotFound(ValueError):
    """No run (or more than one, without --run-id) on the cluster."""


def _ray_init(address: str | None, local_cpus: int | None = None) -> None:
    import ray

    kwargs: dict = {"namespace": NAMESPACE, "include_dashboard": False,
                    "logging_level": "WARNING", "log_to_driver": True}
    if address:
        kwargs["address"] = address
    else:
        # A private local cluster on loopback; other zeroforge commands join with "auto".
        # Logical CPUs are twice the cores: on a laptop the learner, the workers and the
        # evaluator take turns on the same cores rather than waiting for a free one.
        kwargs["num_cpus"] = local_cpus or 2 * (os.cpu_count() or 2)
        kwargs["_node_ip_address"] = "127.0.0.1"
    ray.init(**kwargs)


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S")


def _progress_line(st: dict) -> str:
    d, a = st["desired"], st["alive"]
    elapsed = max(st["elapsed_s"], 1e-9)
    scores = " ".join(f"{k} {v:.0%}" for k, v in st["scores"].items()) or "-"
    return (f"[{st['elapsed_s']:7.1f}s] workers {a['selfplay']}/{d['selfplay']} | "
            f"games {st['games']:.0f} ({st['games'] / elapsed:.1f}/s) | "
            f"positions/s {st['positions'] / elapsed:.0f} | "
            f"steps {st['learner_steps']:.0f} | weights v{st['weights_version']:.0f} | "
            f"lag {st['stream_lag']:.0f} | score vs {scores}")


def train(config: TrainConfig, address: str | None = None, redis_url: str | None = None,
          resume: bool = False, out: TextIO | None = None) -> dict:
    """Run a distributed training job until its limits or ``zeroforge stop``; returns the
    final status."""
    import ray

    from shared.transport import RedisServer
    from shared.transport.stream import check_run_id

    out = out or sys.stdout
    run_id = check_run_id(config.run.run_id or new_run_id())
    run_dir = str(Path(config.run.run_dir).resolve())
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    server = None
    if not redis_url:
        server = RedisServer().start()
        redis_url = server.url
    address = address or os.environ.get("RAY_ADDRESS")
    try:
        _ray_init(address)
        d = config.distributed
        controller = ray.remote(Controller).options(
            name=controller_name(run_id), namespace=NAMESPACE, max_concurrency=16,
            num_cpus=0).remote(config, redis_url, run_id, run_dir, resume, d.metrics_port,
                               d.metrics_host)
        metrics_url = ray.get(controller.start.remote())
        print(f"run {run_id}: metrics at {metrics_url}; `zeroforge status` / `scale` / `stop` "
              "from another terminal", file=out, flush=True)
        status = ray.get(controller.status.remote())
        try:
            while status["state"] != "stopped":
                time.sleep(config.run.progress_every_s)
                status = ray.get(controller.status.remote())
                print(_progress_line(status), file=out, flush=True)
        except KeyboardInterrupt:
            print("stopping (final checkpoint)...", file=out, flush=True)
            status = ray.get(controller.stop.remote())
        print(f"run {run_id} stopped: {status['games']:.0f} games, "
              f"{status['learner_steps']:.0f} learner steps, weights "
              f"v{status['weights_version']:.0f}; checkpoint in {run_dir}", file=out, flush=True)
        return status
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        if server is not None:
            server.stop()


def find_controller(address: str | None, run_id: str | None):
    """Attach to the cluster and return (run_id, controller handle)."""
    import ray

    try:
        ray.init(address=address or os.environ.get("RAY_ADDRESS") or "auto",
                 namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
    except ConnectionError as err:
        raise RunNotFound(f"no Ray cluster to attach to ({str(err).splitlines()[0]}); "
                          "is `zeroforge train` running?") from None
    names = [n for n in ray.util.list_named_actors() if n.startswith("controller-")]
    runs = sorted(re.sub(r"^controller-", "", n) for n in names)
    if run_id:
        if run_id not in runs:
            raise RunNotFound(f"no run {run_id!r} (running: {', '.join(runs) or 'none'})")
    elif len(runs) != 1:
        raise RunNotFound("no run is going" if not runs else
                          f"several runs ({', '.join(runs)}): pass --run-id")
    else:
        run_id = runs[0]
    return run_id, ray.get_actor(controller_name(run_id), namespace=NAMESPACE)


def status_text(st: dict) -> str:
    lines = [f"run {st['run_id']}: {st['state']}, {st['elapsed_s']:.0f}s, "
             f"inference {st['inference']}"]
    lines.append("actors (alive/desired, restarts): " + ", ".join(
        f"{k} {st['alive'][k]}/{st['desired'][k]} ({st['restarts'][k]})" for k in st["desired"]))
    rate = st["positions"] / max(st["elapsed_s"], 1e-9)
    lines.append(f"self-play: {st['games']:.0f} games, {st['positions']:.0f} positions "
                 f"({rate:.0f}/s)")
    lines.append(f"learner: {st['learner_steps']:.0f} steps, {st['games_received']:.0f} games "
                 f"received, samples/insert {st['samples_per_insert']:.2f}, replay "
                 f"{st['replay_positions']:.0f} positions, weights v{st['weights_version']:.0f}")
    lines.append(f"stream lag: {st['stream_lag']:.0f} entries; rejected: "
                 + (", ".join(f"{k} {v:.0f}" for k, v in st["rejected"].items()) or "none"))
    if st["scores"]:
        lines.append("scores: " + ", ".join(f"{k} {v:.0%}" for k, v in st["scores"].items()))
    lines.append(f"metrics: {st['metrics_url']}")
    return "\n".join(lines)


def status_json(st: dict) -> str:
    return json.dumps(st, sort_keys=True)
