"""A process host (``distributed.host_workers=process``) against a real redis-server of
its own: its hosted workers' children open no connection to Redis, they reach it through
the host's one transport (``actors.worker_relay``), so the host's connections stay a
handful as it grows from 1 worker to 6, while every worker plays, its games land in the
stream and the run's signed weights are fetched once for the host. A served child whose
host is killed exits soon: its appends could only fail."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading

import psutil

from tests.integration.test_process_worker import ROOT, gone, wait_until, worker_args
from zeroforge.actors.worker_host import WorkerHost
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.runtime.builder import TransportArgs, build_selfplay_host
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import build_net
from zeroforge.shared.transport import (
    HOST_CONNECTIONS,
    RedisServer,
    WeightSigner,
    WeightStore,
    connect,
    open_transport,
)

TRANSPORT: TransportArgs = {"role": "worker", "weights_cache_dir": None}
WORKERS = 6
"""The host's workers at its largest: more than its transport's connections."""


def by_source(snapshot: dict, name: str) -> dict[str, float]:
    """A counter of a plain snapshot, summed by its ``source`` label."""
    out: dict[str, float] = {}
    for labels, value in snapshot["values"].get(name, []):
        source = dict(labels).get("source", "")
        out[source] = out.get(source, 0.0) + value
    return out


def redis_connections(pid: int, port: int) -> list:
    """The TCP connections process ``pid`` holds to the server on ``port``."""
    return [c for c in psutil.Process(pid).net_connections(kind="tcp")
            if c.raddr and c.raddr.port == port]


def test_a_process_hosts_connections_do_not_grow_with_its_workers(run_id, tmp_path):
    config = load_train_config(None, [
        "game=tictactoe", "net=tiny", "search.num_simulations=2", "run.torch_threads=1",
        "distributed.inference=local", f"distributed.workers_per_host={WORKERS}",
        "distributed.host_workers=process", "selfplay.games_in_parallel=4",
        "selfplay.cpu_share=0.25"])
    key = WeightSigner.generate()
    with RedisServer() as server:  # its own server: every client but ours is the host's
        ctx = dataclasses.replace(config.context(run_id, server.url), run_dir=str(tmp_path),
                                  weights_public_key=key.public_key)
        admin = connect(server.url)
        ours = admin.client_id()

        def clients() -> list[dict]:
            return [c for c in admin.client_list() if c["id"] != str(ours)]

        WeightStore(admin, run_id, signer=key).publish(
            build_net(config.net, make_game(ctx.game).spec), 1)
        host = build_selfplay_host(config, ctx, TRANSPORT, 0, 1)
        assert isinstance(host, WorkerHost)
        stop = threading.Event()
        outcome: dict = {}
        runner = threading.Thread(target=lambda: outcome.update(games=host.run(stop)),
                                  daemon=True)
        runner.start()
        try:
            def every_worker_played(count: int) -> bool:
                rows = host.stats()["workers"]
                return len(rows) == count and all(games > 0 for _, games, _ in rows)

            wait_until(lambda: every_worker_played(1), what="worker 0's games")
            one = clients()
            host.resize(WORKERS)
            wait_until(lambda: every_worker_played(WORKERS), what="every worker's games")
            many = clients()
            children = [w.pid for w in host._workers.values()]
            assert len(children) == WORKERS and all(children)
            assert all(redis_connections(pid, server.port) == [] for pid in children)
            # at most the host's transport's bound (its calls at once, the shard's blocked
            # read for room): fewer than its workers
            assert one and len(many) <= HOST_CONNECTIONS + 1 < WORKERS, (one, many)
            hosts = {c.laddr.port for c in redis_connections(os.getpid(), server.port)}
            assert {int(c["addr"].rsplit(":", 1)[1]) for c in many} <= hosts
            # the run's signed version, from Redis once for all of the host's workers
            assert by_source(host.stats(), "weights_fetches_total") == {
                "redis": 1, "host": WORKERS - 1}
        finally:
            stop.set()
            runner.join(120)
        assert not runner.is_alive() and outcome["games"] > 0
        wait_until(lambda: clients() == [], timeout_s=10, what="the host's transport closed")
        reader = open_transport(server.url, run_id)
        in_stream = [g.game_id for _, g in reader.samples().read(max_count=10_000)]
        reader.close()
        assert sorted(in_stream) == sorted(host.game_ids())
        assert len(in_stream) == outcome["games"]
        admin.close()


PARENT = """
import json, sys, threading, time
from zeroforge.actors.process_worker import ProcessWorker
from zeroforge.actors.worker_relay import HostEndpoints
from zeroforge.deploy.runtime.builder import HOSTED_WORKER
from zeroforge.shared.transport import open_transport

transport = open_transport(sys.argv[2], sys.argv[3])
host = HostEndpoints(transport.samples(), transport.weights(), transport.pace())
worker = ProcessWorker(HOSTED_WORKER, json.loads(sys.argv[1]), 6, report_s=0.3, serve=host)
threading.Thread(target=worker.run, args=(threading.Event(),), daemon=True).start()
while not worker.stats()["values"]:
    time.sleep(0.05)
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_a_served_child_of_a_dead_host_exits_without_waiting_out_its_appends(
        redis_server, run_id, tmp_path):
    args = worker_args(redis_server.url, run_id, str(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(args),
                               redis_server.url, run_id], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert psutil.Process(child).ppid() == parent.pid
        assert redis_connections(child, redis_server.port) == []
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        # well before the 30 s a worker retries its last append (STOP_APPEND_GRACE_S)
        wait_until(lambda: gone(child), timeout_s=20, what="the orphaned child's exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
