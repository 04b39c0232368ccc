"""``distributed.host_workers``: the config's check, the builder's choice of threads or
``ProcessWorker``s, the child's builder working from plain data alone, and the process
protocol (a worker that ends by itself, one that raises) with small services built in
the child by name (``tests/unit/process_services.py``). Redis-backed runs:
tests/integration/test_process_worker.py and test_worker_hosts.py."""

from __future__ import annotations

import json
import threading

import pytest

from zeroforge.actors.process_worker import ProcessWorker, WorkerProcessError
from zeroforge.actors.selfplay_service import SelfPlayService
from zeroforge.actors.worker_host import WorkerHost
from zeroforge.deploy.config import DistributedConfig, TrainConfig, load_train_config
from zeroforge.deploy.runtime import builder
from zeroforge.deploy.runtime.builder import (
    HOSTED_WORKER,
    TransportArgs,
    build_selfplay_host,
    hosted_worker,
    hosts_processes,
)
from zeroforge.shared import config as cfg
from zeroforge.shared.metrics import snapshot_total
from zeroforge.shared.run_context import RunContext

TRANSPORT: TransportArgs = {"role": "worker", "weights_cache_dir": None}


def test_host_workers_is_auto_thread_or_process():
    assert DistributedConfig().host_workers == "auto"
    assert DistributedConfig(host_workers="process").host_workers == "process"
    with pytest.raises(ValueError, match=r"^distributed.host_workers must be auto, thread "
                                         r"or process, got 'fork'$"):
        DistributedConfig(host_workers="fork")
    with pytest.raises(ValueError, match="cannot reach the inference servers"):
        DistributedConfig(host_workers="process", inference="server", workers_per_host=2)
    # one worker an actor hosts nothing: the actor is its process either way
    DistributedConfig(host_workers="process", inference="server", workers_per_host=1)
    # the default is node hosts: there it is refused, as for K > 1
    with pytest.raises(ValueError, match="cannot reach the inference servers"):
        DistributedConfig(host_workers="process", inference="server")


def test_placement_gives_server_fed_workers_an_actor_each_under_the_default_node_hosts():
    def placed(gpus: bool, *settings: str) -> tuple[str, int]:
        d = load_train_config(None, list(settings)).placed(cluster_has_gpus=gpus).distributed
        return d.inference, d.workers_per_host

    # auto: the workers' own nets, children of node hosts, where the cluster has no GPU ...
    assert placed(False) == ("local", 0)
    # ... servers where it has, and those workers are an actor each (their search needs a
    # core; threads of a node host would share one)
    assert placed(True) == ("server", 1)
    assert placed(False, "distributed.inference=server") == ("server", 1)
    assert placed(True, "distributed.inference=local") == ("local", 0)
    # what a user set stays: hosts of K, node hosts of threads
    assert placed(True, "distributed.workers_per_host=4") == ("server", 4)
    assert placed(True, "distributed.host_workers=thread") == ("server", 0)
    # replaying workers use no server: node hosts of threads as before
    assert placed(True, "selfplay.simulate_from=games.msgpack") == ("server", 0)
    # the rest of the config is the config's
    config = load_train_config("go9-gpu", [])
    assert config.placed(cluster_has_gpus=True) == config  # sets server and 1 itself


def config_and_context(*settings: str) -> tuple[TrainConfig, RunContext]:
    config = load_train_config(None, ["game=tictactoe", "net=tiny", "search.num_simulations=2",
                                      "distributed.inference=local", *settings])
    return config, config.context("hosted", "memory://hosted-workers")


def test_process_hosts_build_their_workers_in_children_from_plain_data():
    config, ctx = config_and_context("distributed.workers_per_host=2",
                                     "distributed.host_workers=process")
    host = build_selfplay_host(config, ctx, TRANSPORT, 1, 2)
    assert isinstance(host, WorkerHost) and host.label == "h1"
    workers = host._workers
    assert sorted(workers) == [2, 3]
    for index, worker in workers.items():
        assert isinstance(worker, ProcessWorker)
        assert worker.build == HOSTED_WORKER and worker.index == index
        # what crosses into the child survives JSON: plain data only
        assert json.loads(json.dumps(worker.args)) == worker.args
        assert cfg.from_dict(TrainConfig, worker.args["config"]) == config
        assert RunContext.from_dict(worker.args["ctx"]) == ctx
    # no child is started before the host runs
    assert all(w.pid is None for w in workers.values())


def test_auto_hosts_searching_workers_in_processes_and_waiting_ones_in_threads():
    """``auto``: workers that search with their own net get a process each; workers of
    inference servers, or replaying recorded games, mostly wait: threads."""
    searching, _ = config_and_context("distributed.workers_per_host=0")
    assert hosts_processes(searching, None)
    assert not hosts_processes(searching, object())  # type: ignore[arg-type]
    replaying, _ = config_and_context("distributed.workers_per_host=4",
                                      "selfplay.simulate_from=games.msgpack")
    assert not hosts_processes(replaying, None)
    default, _ = config_and_context()
    assert hosts_processes(default, None)  # node hosts by default: a process a worker
    one, _ = config_and_context("distributed.workers_per_host=1")
    assert not hosts_processes(one, None)  # one worker an actor: the actor is its process
    threads, _ = config_and_context("distributed.workers_per_host=0",
                                    "distributed.host_workers=thread")
    assert not hosts_processes(threads, None)


def test_the_childs_builder_makes_the_same_worker_as_a_thread_host():
    config, ctx = config_and_context("distributed.workers_per_host=2",
                                     "distributed.host_workers=thread")
    plain = json.loads(json.dumps({"config": cfg.to_dict(config), "ctx": ctx.to_dict(),
                                   "transport": TRANSPORT}))
    worker = hosted_worker(plain, 3)
    assert isinstance(worker, SelfPlayService) and worker.worker_id == "w3"
    threads = build_selfplay_host(config, ctx, TRANSPORT, 1, 2)
    assert isinstance(threads, WorkerHost)
    twin = threads._workers[3]
    assert isinstance(twin, SelfPlayService) and twin.worker_id == "w3"


def test_process_hosts_refuse_inference_servers():
    config, ctx = config_and_context("distributed.workers_per_host=2",
                                     "distributed.host_workers=process")
    with pytest.raises(ValueError, match="cannot use inference servers"):
        build_selfplay_host(config, ctx, TRANSPORT, 0, 2, evaluator=object())  # type: ignore[arg-type]


# --- the process protocol, with small services built in the child by name ------------------

COUNTING = "tests.unit.process_services:counting"
"""A light builder: the child imports no torch, so these tests take a second each."""


def test_a_worker_process_that_ends_by_itself_returns_its_count():
    worker = ProcessWorker(COUNTING, {"games": 5}, 7, report_s=0.1)
    assert worker.run(threading.Event()) == 5
    assert worker.game_ids() == ["g0", "g1", "g2", "g3", "g4"]
    assert snapshot_total(worker.stats(), "selfplay_games_total") == 5
    with pytest.raises(RuntimeError, match="run was called twice"):
        worker.run(threading.Event())


def test_a_worker_process_that_raises_fails_run_with_its_line():
    worker = ProcessWorker(COUNTING, {"games": 1, "fail": "bad  news"}, 2,
                           report_s=0.1)
    with pytest.raises(WorkerProcessError) as caught:
        worker.run(threading.Event())
    assert str(caught.value) == (f"hosted worker 2 failed in its process (pid {worker.pid}, "
                                 "exit code 1): RuntimeError: worker 2 broke: bad news")


def test_hosts_close_their_shared_transport_after_their_last_worker(monkeypatch):
    """A host of threads or of processes opens one transport for its workers and closes
    it once its run has ended, not before (its workers use it until then)."""
    opened: list[list[str]] = []
    real = builder.open_run_transport

    def recording(ctx, transport, shared_by_threads=False):
        own = real(ctx, transport, shared_by_threads=shared_by_threads)
        calls: list[str] = []
        opened.append(calls)
        close = own.close
        own.close = lambda: (calls.append("closed"), close())  # type: ignore[method-assign]
        return own

    monkeypatch.setattr(builder, "open_run_transport", recording)
    for kind in ("thread", "process"):
        opened.clear()
        config, ctx = config_and_context("distributed.workers_per_host=2",
                                         f"distributed.host_workers={kind}")
        host = build_selfplay_host(config, ctx, TRANSPORT, 1, 2)
        assert opened == [[]], kind  # one for the host, open while it is built
        stop = threading.Event()
        stop.set()
        assert isinstance(host, WorkerHost) and host.run(stop) == 0
        assert opened == [["closed"]], kind
