"""The distributed run's driver: Redis, Ray, the run's controller, progress until the end.

``zeroforge train`` with no ``--local``: start (or use) Redis, start (or join) Ray, start
the run's Controller (``deploy/ray_runtime.py``), print progress until the run ends, and
write the run record (``config.yaml`` here; the learner and evaluator write the rest).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from shared import config as cfg
from shared.run_record import RunRecord
from shared.status import RunStatus
from shared.train_config import TrainConfig
from shared.transport.stream import check_run_id


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S")


def checkpoint_note(run_dir: str, since: float) -> str:
    """Where the run's checkpoint is, only if one was written since ``since`` (epoch s)."""
    from learner.learner import CHECKPOINT_NAME

    path = Path(run_dir) / CHECKPOINT_NAME
    if path.exists() and path.stat().st_mtime >= since - 1:
        return f"checkpoint in {path}"
    if path.exists():
        return f"no checkpoint written by this run ({path} is an earlier one)"
    return "no checkpoint written"


def train(config: TrainConfig, address: str | None = None, redis_url: str | None = None,
          resume: bool = False, out: TextIO | None = None) -> RunStatus:
    """Run a distributed training job until its limits or ``zeroforge stop``; returns the
    final status."""
    from deploy import ray_runtime, run_registry
    from shared.transport import RedisServer, RedisServerConfig

    out = out or sys.stdout
    run_id = check_run_id(config.run.run_id or new_run_id())
    run_dir = str(Path(config.run.run_dir).resolve())
    RunRecord(run_dir).write_config(cfg.to_dict(config))
    server = None
    entry = None
    if not redis_url:
        # AOF in the run dir, restarted by its supervisor if it dies (docs/reliability.md)
        server = RedisServer(RedisServerConfig(data_dir=str(Path(run_dir) / "redis"))).start()
        redis_url = server.url
    address = address or os.environ.get("RAY_ADDRESS")
    ctx = dataclasses.replace(config.context(run_id, redis_url), run_dir=run_dir)
    try:
        if address:
            ray_runtime.join(address)
        else:
            ray_runtime.init_local()
        # ray.init installs its own SIGTERM handler (exit at once): ours stops cleanly
        from deploy.commands import install_sigterm

        install_sigterm()
        started = time.time()
        run = ray_runtime.start_run(config, ctx, resume)
        status = run.status()
        token = ray_runtime.token_path()
        entry = run_registry.RunEntry(
            run_id=run_id, address=ray_runtime.cluster_address(),
            token_path=str(token) if token is not None and token.exists() else "",
            metrics_url=status.metrics_url, driver_pid=os.getpid(), run_dir=run_dir,
            started=started)
        run_registry.register(entry)
        print(f"run {run_id}: metrics at {status.metrics_url}; `zeroforge status` / `scale` / "
              "`stop` from another terminal", file=out, flush=True)
        if run.warning:
            print(f"zeroforge train: warning: {run.warning}", file=sys.stderr, flush=True)
        try:
            while status.state not in ("stopped", "failed"):
                time.sleep(config.run.progress_every_s)
                status = run.status()
                print(status.progress_line(), file=out, flush=True)
        except KeyboardInterrupt:
            print("stopping (final checkpoint)...", file=out, flush=True)
            status = run.stop()
        print(f"run {run_id} {status.state}: {status.games:.0f} games, "
              f"{status.learner_steps:.0f} learner steps, weights "
              f"v{status.weights_version:.0f}; {checkpoint_note(run_dir, started)}",
              file=out, flush=True)
        return status
    finally:
        if entry is not None:
            run_registry.unregister(entry)
        # Ray (the run's actors) first, Redis last: actors stopping drain into Redis
        ray_runtime.disconnect()
        if server is not None:
            server.stop()
