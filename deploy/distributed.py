"""The distributed run's driver: Redis, Ray, the run's controller, progress until the end.

``zeroforge train`` with no ``--local``: start (or use) Redis, start (or join) Ray, start
the run's Controller (``deploy/ray/controller.py``), print progress until the run ends, and
write the run record (``config.yaml`` here; the learner and evaluator write the rest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TextIO

from zeroforge.deploy.config import TrainConfig
from zeroforge.deploy.redis_follow import SizingFollower
from zeroforge.deploy.runtime.status import RunStatus
from zeroforge.shared import config as cfg
from zeroforge.shared.run_files import RunFiles
from zeroforge.shared.transport import check_run_id

KEEP_ALIVE_S = 0.5
"""Seconds between the driver's fetches of the controller's state (``RunHandle.keep_alive``):
what a successor controller may miss of its predecessor's last changes."""


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S")


def checkpoint_note(run_dir: str, since: float) -> str:
    """Where the run's checkpoint is, only if one was written since ``since`` (epoch s)."""
    from zeroforge.learner.learner import CHECKPOINT_NAME

    path = Path(run_dir) / CHECKPOINT_NAME
    if path.exists() and path.stat().st_mtime >= since - 1:
        return f"checkpoint in {path}"
    if path.exists():
        return f"no checkpoint written by this run ({path} is an earlier one)"
    return "no checkpoint written"


def train(config: TrainConfig, address: str | None = None, redis_url: str | None = None,
          resume: bool = False, out: TextIO | None = None, continuing: bool | None = None
          ) -> RunStatus:
    """Run a distributed training job until its limits or ``zeroforge stop``; returns the
    final status.

    ``continuing`` (default: ``resume``; ``zeroforge train --resume auto`` also without a
    checkpoint): continue the run of this id if it is there. The run's redis-servers
    start on their earlier ports and passwords (``deploy/run_redis.py``), and when the
    run's actors still live on the cluster (their driver was killed), the new controller
    re-attaches to them (``start_run``) instead of starting a second run."""
    continuing = resume if continuing is None else continuing
    from zeroforge.deploy.ray.cluster import (
        cluster_address,
        disconnect,
        init_local,
        join,
        token_path,
    )
    from zeroforge.deploy.ray.handle import ControllerLost, start_run
    from zeroforge.deploy.ray.naming import kill_run_actors
    from zeroforge.deploy.ray.resources import learner_group_misfit
    from zeroforge.deploy.run_redis import AUTH_DIR, run_passwords, start_run_redis
    from zeroforge.deploy.runtime import run_registry

    out = out or sys.stdout
    run_id = check_run_id(config.run.run_id or new_run_id())
    run_dir = str(Path(config.run.run_dir).resolve())
    RunFiles(run_dir).write_config(cfg.to_dict(config))
    # The learner's signing key: made at the run's first start, the same one on --resume;
    # readers refuse weights it did not sign (docs/reliability.md, "Signed weights").
    from zeroforge.shared.transport import WeightSigner, signing_key_path

    weights_key = WeightSigner.load_or_create(signing_key_path(run_dir)).public_key
    server = None
    entry = None
    dashboard = mirror = None
    run = None
    auth_dir = ""
    passwords: dict[str, str] | None = None
    sizings: dict = {}
    sizer = None
    if not redis_url or config.distributed.stream_servers:
        # the servers we start, sized for the run as `zeroforge plan` sizes them
        # (maxclients, maxmemory with noeviction, output buffers: docs/scaling.md), and
        # sized again as it is scaled up (deploy/redis_follow.py)
        from zeroforge.deploy.plan import run_sizer

        sizer = run_sizer(config)
        sizings = sizer(config.selfplay.workers)
    if not redis_url:
        # a user a role on the servers we start, their passwords in 0600 files of the run
        # dir: the actors get the path, not the secrets (shared/transport/acl.py)
        passwords = run_passwords(Path(run_dir), continuing)
        auth_dir = str(Path(run_dir) / AUTH_DIR)
        # AOF in the run dir, restarted by its supervisor if it dies (docs/reliability.md)
        server = start_run_redis(Path(run_dir) / "redis", continuing, passwords,
                                 sizings.get("run"))
        redis_url = server.endpoint
    address = address or os.environ.get("RAY_ADDRESS")
    ctx = dataclasses.replace(config.context(run_id, redis_url), run_dir=run_dir,
                              redis_auth_dir=auth_dir, weights_public_key=weights_key)
    stream_servers: list = []
    try:
        for index in range(config.distributed.stream_servers):
            # the stream shards' own servers, supervised and persisted like the run's
            stream_servers.append(start_run_redis(Path(run_dir) / f"redis-stream-{index}",
                                                  continuing, passwords,
                                                  sizings.get("stream")))
        stream_urls = (*config.distributed.stream_redis,
                       *(s.endpoint if passwords else s.url for s in stream_servers))
        if stream_urls:
            ctx = dataclasses.replace(ctx, stream_urls=stream_urls)
        if address:
            join(address)
        else:
            init_local()
        # ray.init installs its own SIGTERM handler (exit at once): ours stops cleanly
        from zeroforge.deploy.signals import install_sigterm

        install_sigterm()
        misfit = learner_group_misfit(config)
        if misfit:
            raise ValueError(misfit)
        started = time.time()
        run = start_run(config, ctx, resume, reattach=continuing)
        status = run.status()
        follower = (SizingFollower(sizer, {"run": [server] if server else [],
                                           "stream": stream_servers},
                                   config.selfplay.workers) if sizer else None)
        if run.reattached:
            print(f"run {run_id}: {run.reattached}", file=out, flush=True)
        token = token_path()
        # the run server (dashboard, `zeroforge status`) answers from the driver's copy
        from zeroforge.deploy.dashboard.mirror import RunMirror
        from zeroforge.deploy.dashboard.run import LEGEND, RunDashboard

        mirror = RunMirror(lambda: run, status).start()
        # per-worker detail is asked of the controller when a user asks for a page
        dashboard = RunDashboard(config.run, run_id, run_dir, mirror.status, mirror.merged,
                                 started, workers=lambda page: run.worker_rows(page))
        entry = run_registry.RunEntry(
            run_id=run_id, address=cluster_address(),
            token_path=str(token) if token is not None and token.exists() else "",
            metrics_url=status.metrics_url, driver_pid=os.getpid(), run_dir=run_dir,
            started=started, dashboard_url=dashboard.url,
            dashboard_token_path=dashboard.token_path)
        run_registry.register(entry)
        print(f"run {run_id}: metrics at {status.metrics_url}; `zeroforge status` / `scale` / "
              "`stop` from another terminal", file=out, flush=True)
        print(f"run {run_id}: {dashboard.announce()}", file=out, flush=True)
        print(LEGEND, file=out, flush=True)
        if run.warning:
            print(f"zeroforge train: warning: {run.warning}", file=sys.stderr, flush=True)
        try:
            # Every half second the controller's state is fetched for a successor; a dead
            # controller is replaced there (docs/reliability.md, "kill -9 of the controller")
            told, next_line = 0, time.monotonic() + config.run.progress_every_s
            while status.state not in ("stopped", "failed"):
                time.sleep(min(KEEP_ALIVE_S, config.run.progress_every_s))
                run.keep_alive()
                for line in run.takeovers[told:]:
                    print(f"zeroforge train: warning: {line}", file=sys.stderr, flush=True)
                told = len(run.takeovers)
                if time.monotonic() >= next_line:
                    next_line += config.run.progress_every_s
                    status = run.status()
                    print(status.progress_line(), file=out, flush=True)
                    # `zeroforge scale` up: the servers we started grow with it
                    for line in (follower.follow(status.desired.get("selfplay", 0))
                                 if follower else []):
                        print(f"run {run_id}: {line}", file=out, flush=True)
        except ControllerLost as err:
            # its actors are killed below; the stream and the last checkpoint remain
            status = dataclasses.replace(status, state="failed", error=str(err))
        except KeyboardInterrupt:
            print("stopping (final checkpoint)...", file=out, flush=True)
            status = run.stop(by="interrupt")
        if mirror is not None:
            mirror.stop()
            mirror.set_status(status)
        print(f"run {run_id} {status.state}: {status.games:.0f} games, "
              f"{status.learner_steps:.0f} learner steps, weights "
              f"v{status.weights_version:.0f}; {checkpoint_note(run_dir, started)}",
              file=out, flush=True)
        return status
    finally:
        if entry is not None:
            run_registry.unregister(entry)
        if mirror is not None:
            mirror.stop()
        if dashboard is not None:
            dashboard.close()
        # Ray (the run's actors) first, Redis last: actors stopping drain into Redis. They
        # are detached (they outlive a dead controller), so they are killed explicitly.
        if run is not None:
            run.shutdown()
        else:
            with contextlib.suppress(Exception):
                kill_run_actors(run_id)
        disconnect()
        if ctx.weights_cache == "auto":
            # what a crashed worker left in this node's weight cache (a clean stop of the
            # node's last worker removes it already)
            from zeroforge.shared.transport import default_cache_root

            shutil.rmtree(default_cache_root() / "zeroforge-weights" / run_id,
                          ignore_errors=True)
        for stream_server in stream_servers:
            stream_server.stop()
        if server is not None:
            server.stop()
