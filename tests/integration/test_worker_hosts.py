"""Self-play workers hosted several to an actor (``distributed.workers_per_host``), here
simulating ones (``selfplay.simulate_from``: recorded games replayed), on real Ray and a
real redis-server: status has a row per host (its workers and their counters summed),
the workers one by one come a page at a time (``worker_rows``), a scale resizes the hosts
(newest first) and adds or retires whole ones, and every game appended reaches the learner
exactly once. With ``distributed.host_workers=process`` the hosted workers (self-play on
their own nets) are child processes of the actor, with the same rows, resize and
exactly-once intake."""

from __future__ import annotations

import dataclasses

import psutil
import ray

from benchmarks.scale_sim import record_games
from tests.integration.test_distributed import SETTINGS
from tests.integration.test_learner_group_run import wait_status
from zeroforge.actors.replay_worker import save_games
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.handle import start_run
from zeroforge.deploy.ray.naming import run_actor_names


def _selfplay_rows(st: dict) -> dict[int, dict]:
    return {r["index"]: r for r in st["actors"] if r["kind"] == "selfplay"}


def _worker_rows(handle) -> dict[int, dict]:
    page = handle.worker_rows(0)
    assert page["pages"] == 1 and page["workers"] == len(page["rows"])
    return {r["index"]: r for r in page["rows"]}


def _hosts_of(handle) -> list[int]:
    """Each worker's host, in worker order."""
    return [r["host"] for _, r in sorted(_worker_rows(handle).items())]


def test_hosted_simulating_workers_scale_and_lose_no_game(local_ray, redis_server, run_id,
                                                          tmp_path):
    games = tmp_path / "games.msgpack"
    save_games(games, record_games("tictactoe", 8, seed=3))
    settings = [*SETTINGS, "selfplay.workers=5", "distributed.workers_per_host=3",
                f"selfplay.simulate_from={games}", "selfplay.simulate_games_per_min=120",
                "learner.min_replay=100000"]  # intake only: nothing to train here
    config = load_train_config(None, settings)
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(tmp_path))
    handle = start_run(config, ctx)
    try:
        # two hosts: workers 0-2 in actor 0, 3-4 in actor 1; every worker counts its games
        wait_status(handle, lambda s: s["alive"]["selfplay"] == 5 and all(
            r["games"] > 0 for r in _worker_rows(handle).values()))
        st = handle.status_json()
        hosts = _selfplay_rows(st)
        assert sorted(hosts) == [0, 1]
        assert [hosts[0]["workers"], hosts[1]["workers"]] == [3, 2]
        assert hosts[0]["pid"] != hosts[1]["pid"]
        assert _hosts_of(handle) == [0, 0, 0, 1, 1]
        # a host's row sums its workers' games (a report later than the page's, or equal)
        workers = _worker_rows(handle)
        assert handle.status_json()["games"] >= sum(r["games"] for r in workers.values())
        assert len(handle.actor_handles("selfplay")) == 2

        handle.scale(workers=7)  # actor 1 grows to 3, a third actor hosts worker 6
        wait_status(handle, lambda s: _hosts_of(handle) == [0, 0, 0, 1, 1, 1, 2]
                    and s["alive"]["selfplay"] == 7)
        assert len(handle.actor_handles("selfplay")) == 3

        handle.scale(workers=2)  # actors 1 and 2 retire, actor 0 keeps workers 0-1
        st = wait_status(handle, lambda s: sorted(_worker_rows(handle)) == [0, 1]
                         and sorted(_selfplay_rows(s)) == [0]
                         and s["alive"]["selfplay"] == 2)
        games_before = st["games"]
        st = wait_status(handle, lambda s: s["games"] > games_before + 4)
        final = handle.stop().to_json()
    finally:
        handle.shutdown()
    assert final["state"] == "stopped", final["error"]
    assert final["error"] == ""
    assert final["restarts"]["selfplay"] == 0  # a resize is no crash
    # every game the workers appended (retired ones' included) was received once
    assert final["games"] >= games_before + 4
    assert final["games_received"] == final["games"]
    assert run_actor_names(run_id) == []



def _worker_processes(actor_pid: int) -> list[psutil.Process]:
    """The hosted workers' processes of a self-play actor (multiprocessing's spawn
    children; its resource tracker is not one)."""
    return [p for p in psutil.Process(actor_pid).children()
            if "spawn_main" in " ".join(p.cmdline())]


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _searching_run(run_id, redis_server, tmp_path, *settings: str):
    """A run of 2 workers that search with their own net, hosted as ``settings`` say;
    intake only (nothing to train here)."""
    config = load_train_config(None, [*SETTINGS, "selfplay.workers=2",
                                      "search.num_simulations=4",
                                      "learner.min_replay=100000", *settings])
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(tmp_path))
    return start_run(config, ctx)


def test_process_hosted_workers_play_resize_and_lose_no_game(local_ray, redis_server, run_id,
                                                             tmp_path):
    handle = _searching_run(run_id, redis_server, tmp_path, "distributed.workers_per_host=2",
                            "distributed.host_workers=process")
    try:
        # one actor hosting workers 0 and 1, each a process of its own playing games
        wait_status(handle, lambda s: s["alive"]["selfplay"] == 2 and sorted(
            _worker_rows(handle)) == [0, 1] and all(
            r["games"] > 0 for r in _worker_rows(handle).values()))
        assert _hosts_of(handle) == [0, 0]
        (actor,) = handle.actor_handles("selfplay")
        actor_pid = ray.get(actor.pid.remote())
        assert _selfplay_rows(handle.status_json())[0]["pid"] == actor_pid
        children = _worker_processes(actor_pid)
        assert len(children) == 2

        handle.scale(workers=1)  # worker 1's process stops, appending its games first
        st = wait_status(handle, lambda s: sorted(_worker_rows(handle)) == [0]
                         and s["alive"]["selfplay"] == 1)
        assert sum(not _gone(p) for p in children) == 1
        assert len(_worker_processes(actor_pid)) == 1
        games_before = st["games"]
        wait_status(handle, lambda s: s["games"] > games_before + 2)
        final = handle.stop().to_json()
    finally:
        handle.shutdown()
    assert final["state"] == "stopped", final["error"]
    assert final["error"] == ""
    assert final["restarts"]["selfplay"] == 0
    # every game both processes appended (the retired one's included) was received once
    assert final["games_received"] == final["games"] > games_before
    assert all(_gone(p) for p in children)
    assert run_actor_names(run_id) == []


def test_node_hosts_book_their_workers_and_scale_by_nodes(local_ray, redis_server, run_id,
                                                         tmp_path):
    """``workers_per_host=0``: a host takes as many workers as the node's free CPUs hold
    (half a CPU each here; the local node has 2, the learner takes 0.25), each a process
    of its own (``host_workers=auto``: they search with their own net); workers beyond
    what the nodes hold wait in a host of their own; a scale down keeps the oldest host."""
    handle = _searching_run(run_id, redis_server, tmp_path, "distributed.workers_per_host=0",
                            "distributed.worker_cpus=0.5")
    try:
        wait_status(handle, lambda s: s["alive"]["selfplay"] == 2 and all(
            r["games"] > 0 for r in _worker_rows(handle).values()))
        assert [(r["index"], r["workers"]) for r in
                _selfplay_rows(handle.status_json()).values()] == [(0, 2)]
        (actor,) = handle.actor_handles("selfplay")
        assert len(_worker_processes(ray.get(actor.pid.remote()))) == 2

        # 3 more: 0.75 CPU is free beside the first host (a host of 1); the other 2 wait
        # in a host of their own (the whole node holds 4), pending until CPUs free up
        handle.scale(workers=5)
        st = wait_status(handle, lambda s: s["alive"]["selfplay"] == 3
                         and s["actor_states"]["selfplay"].get("pending") == 2)
        hosts = _selfplay_rows(st)
        assert [(r["workers"], r["state"]) for r in hosts.values()] == [
            (2, "alive"), (1, "alive"), (2, "pending")]
        assert st["waiting"]["selfplay"].startswith("2 waiting for 0.5 CPU each")
        assert _hosts_of(handle) == [0, 0, 1, 2, 2]

        handle.scale(workers=1)  # the oldest host keeps worker 0; the others go
        st = wait_status(handle, lambda s: sorted(_worker_rows(handle)) == [0]
                         and sorted(_selfplay_rows(s)) == [0]
                         and s["alive"]["selfplay"] == 1)
        games_before = st["games"]
        wait_status(handle, lambda s: s["games"] > games_before + 2)
        final = handle.stop().to_json()
    finally:
        handle.shutdown()
    assert final["state"] == "stopped", final["error"]
    assert final["error"] == "" and final["restarts"]["selfplay"] == 0
    assert final["games_received"] == final["games"] > games_before
    assert run_actor_names(run_id) == []
