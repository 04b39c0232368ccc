"""The distributed runtime on a real local Ray (2 CPUs) and the real bundled redis-server.

Each test starts its own run (controller + learner + self-play workers) and checks what a
user relies on: games reach the learner exactly once, weights flow back, scaling and
actor deaths lose nothing, malformed entries are rejected while the run goes on.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from pathlib import Path

import msgpack
import numpy as np
import psutil
import pytest
import ray

from tests.fault_report import report
from tests.unit.test_entry_limits import deep_entry, nested_array_bomb
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.handle import start_run as start_run_handle
from zeroforge.shared.games import make_game
from zeroforge.shared.samples import EntryLimits, GameSamples, encode
from zeroforge.shared.transport import connect, stream_key

SETTINGS = [
    "game=tictactoe", "net=tiny", "search.num_simulations=12", "selfplay.games_in_parallel=8",
    "selfplay.workers=1", "learner.batch_size=32", "learner.min_replay=64",
    "learner.samples_per_insert=2", "learner.optimizer=adamw", "learner.lr=0.003",
    "learner.publish_every_steps=5", "learner.checkpoint_every_s=1",
    "learner.train_steps_per_round=4",
    "distributed.inference=local", "distributed.worker_cpus=0.25",
    "distributed.learner_cpus=0.25", "distributed.evaluator=false",
    "distributed.monitor_interval_s=0.3",
    # a worker keeps to the quarter core it books: the run waits on heartbeats and
    # faults, not on throughput, and the suite runs several such runs side by side
    "selfplay.cpu_share=0.25",
]


def wait_for(check, timeout: float = 180.0, every: float = 0.5):
    """Poll ``check()`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


_RUNS: list = []


@pytest.fixture(autouse=True)
def shutdown_runs():
    """Each test's run is shut down afterwards, so its actors free the CPUs they hold.
    Other modules start runs with ``start_run`` too and shut them down themselves: what
    they left in the list is forgotten first (in a parallel suite their test may have run
    in this process just before, in another Ray cluster)."""
    _RUNS.clear()
    yield
    runs = list(_RUNS)
    _RUNS.clear()
    for controller in reversed(runs):
        ray.get(controller.shutdown.remote())
        ray.kill(controller)


@pytest.fixture(scope="module")
def redis_server(roles_server):
    """These runs' Redis has a user a role and the default user off, as the driver starts
    it (``deploy/run_redis.py``): each actor connects as its role, given only the
    endpoint and the directory of the role passwords."""
    return roles_server


def start_run(redis_server, run_id, tmp_path, *extra):
    """The run's controller actor (started through the runtime, as the driver does); on
    a server with role users (``roles_server``), each actor connects as its role."""
    config = load_train_config(None, [*SETTINGS, *extra])
    ctx = dataclasses.replace(config.context(run_id, redis_server.url), run_dir=str(tmp_path))
    if hasattr(redis_server, "auth_dir"):
        ctx = redis_server.context(ctx)
    controller = start_run_handle(config, ctx).actor
    _RUNS.append(controller)
    return controller


def peak_rss(pid: int) -> int:
    """The most resident memory process ``pid`` has held, in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def status(controller) -> dict:
    return ray.get(controller.status.remote())


def all_ids(handles) -> list[str]:
    return [i for ids in ray.get([h.game_ids.remote() for h in handles]) for i in ids]


def test_games_reach_the_learner_exactly_once_and_weights_flow_back(
        local_ray, redis_server, run_id, tmp_path):
    controller = start_run(redis_server, run_id, tmp_path)
    wait_for(lambda: status(controller)["weights_version"] >= 3)
    workers = ray.get(controller.actor_handles.remote("selfplay"))
    [learner] = ray.get(controller.actor_handles.remote("learner"))
    # later games are played with published weights: the worker's version moves on
    def worker_version():
        snap = ray.get(workers[0].stats.remote())
        series = {tuple(map(tuple, k)): v for k, v in snap["values"]["weights_version"]}
        return series[(("component", "selfplay"),)]

    wait_for(lambda: worker_version() >= 2)
    # per-actor rows: one per live actor, with its pid, node and own counters
    pids = {("selfplay", 0): ray.get(workers[0].pid.remote()),
            ("learner", 0): ray.get(learner.pid.remote())}
    node = ray.get(learner.node_id.remote())[:8]
    rows = wait_for(lambda: all((r := {(a["kind"], a["index"]): a
                                       for a in status(controller)["actors"]})
                                .get(k, {}).get("pid") == p for k, p in pids.items()) and r)
    assert set(rows) == set(pids)
    assert all(r["state"] == "alive" and r["node"] == node for r in rows.values())
    assert rows[("selfplay", 0)]["games"] > 0 and rows[("selfplay", 0)]["positions"] > 0
    assert rows[("learner", 0)]["steps"] > 0 and rows[("learner", 0)]["games"] == 0
    final = ray.get(controller.stop.remote())
    produced = all_ids(workers)
    received = ray.get(learner.game_ids.remote())
    assert len(produced) >= 10
    assert collections.Counter(received) == collections.Counter(produced)
    assert final["games_received"] == len(produced) == final["games"]
    assert final["state"] == "stopped" and final["stopped_by"] == "command"
    assert (tmp_path / "checkpoint.pt").exists()


def test_scaling_up_and_down_loses_no_game(local_ray, redis_server, run_id, tmp_path):
    controller = start_run(redis_server, run_id, tmp_path)
    wait_for(lambda: status(controller)["games"] > 0)
    ray.get(controller.scale.remote(workers=3))
    wait_for(lambda: status(controller)["alive"]["selfplay"] == 3)
    # every worker has played (its row, whether it has an actor of its own or a place in
    # a node host, the default): the retired ones then have games to hand over
    wait_for(lambda: len(rows := ray.get(controller.worker_rows.remote())["rows"]) == 3
             and all(r["games"] > 0 for r in rows), timeout=90)
    ray.get(controller.scale.remote(workers=1))
    wait_for(lambda: status(controller)["alive"]["selfplay"] == 1)
    before = status(controller)["games"]
    wait_for(lambda: status(controller)["games"] > before)  # the remaining one still plays
    [learner] = ray.get(controller.actor_handles.remote("learner"))
    final = ray.get(controller.stop.remote())
    # retired workers are gone (their CPUs freed); their counters live on in the controller:
    # every game any worker appended was received, and none twice
    received = collections.Counter(ray.get(learner.game_ids.remote()))
    assert max(received.values()) == 1
    assert final["games_received"] == final["games"] == sum(received.values())
    assert {i.split("-")[0] for i in received} == {"w0", "w1", "w2"}


def test_dead_worker_is_replaced_and_dead_learner_resumes(
        local_ray, redis_server, run_id, tmp_path):
    controller = start_run(redis_server, run_id, tmp_path)
    wait_for(lambda: status(controller)["learner_steps"] >= 10)
    [worker] = ray.get(controller.actor_handles.remote("selfplay"))
    ray.kill(worker)
    wait_for(lambda: status(controller)["restarts"]["selfplay"] == 1
             and status(controller)["alive"]["selfplay"] == 1)
    [learner] = ray.get(controller.actor_handles.remote("learner"))
    wait_for(lambda: (tmp_path / "checkpoint.pt").exists())
    before = status(controller)["learner_steps"]
    ray.kill(learner)
    # counters never go back: not to 0 while no learner reports, not to the checkpoint's
    # value when its successor does
    seen = []

    def successor_reports():
        st = status(controller)
        seen.append(st["learner_steps"])
        return st["restarts"]["learner"] == 1 and st["alive"]["learner"] == 1
    wait_for(successor_reports, every=0.2)
    assert min(seen) >= before, (before, seen)
    new_workers = ray.get(controller.actor_handles.remote("selfplay"))
    [new_learner] = wait_for(lambda: [h for h in ray.get(
        controller.actor_handles.remote("learner")) if h != learner])
    # the replacement restored the checkpoint: its counters go on, they don't restart at 0
    wait_for(lambda: status(controller)["learner_steps"] >= 10)
    final = ray.get(controller.stop.remote())
    # every game the replacement worker made was received once; none twice overall
    received = ray.get(new_learner.game_ids.remote())
    counts = collections.Counter(received)
    assert counts and max(counts.values()) == 1
    assert set(all_ids(new_workers)) <= set(received)
    assert final["learner_steps"] >= max(seen)
    assert final["games"] >= final["games_received"]


def test_malformed_entries_are_rejected_while_the_run_goes_on(
        local_ray, redis_server, run_id, tmp_path):
    controller = start_run(redis_server, run_id, tmp_path)
    wait_for(lambda: status(controller)["games_received"] > 0)
    client = connect(redis_server.url)
    # one entry per reason, each broken in its own way; the run is tic-tac-toe
    ttt = make_game("tictactoe").spec
    game = GameSamples(ttt.spec_string, ttt.version, np.zeros((3, *ttt.obs_shape), np.uint8),
                       np.full((3, ttt.num_actions), 1 / ttt.num_actions, np.float32),
                       np.array([0, 1, 0], np.int8), outcome=1, game_id="bad")
    fields = msgpack.unpackb(encode(game), raw=False)
    other = make_game("gomoku:size=4,k=3").spec
    foreign = dataclasses.replace(
        game, game=other.spec_string, obs=np.zeros((3, *other.obs_shape), np.uint8),
        policy=np.full((3, other.num_actions), 1 / other.num_actions, np.float32))
    bad = {
        "not_msgpack": {"d": b"\xc1garbage"},
        "no_data": {"nothing": b"here"},
        "unknown_schema": {"d": msgpack.packb({**fields, "schema": 99}, use_bin_type=True)},
        "bad_outcome": {"d": msgpack.packb({**fields, "outcome": 5}, use_bin_type=True)},
        "bad_to_play": {"d": msgpack.packb({**fields, "to_play": b"\x00\x02\x00"},
                                           use_bin_type=True)},
        "wrong_game": {"d": encode(foreign)},
        # hostile ones: 16 MiB of nested empty arrays (~1 GiB as Python lists), the same
        # as large as the run's limits let an entry be, and 10,000 arrays deep
        "oversized": {"d": nested_array_bomb()},
        "over_limits": {"d": nested_array_bomb(
            EntryLimits.for_games([make_game("tictactoe").spec]).max_bytes)},
        "too_deep": {"d": deep_entry()},
    }
    learner = psutil.Process(ray.get(ray.get(controller.actor_handles.remote("learner"))[0]
                                     .pid.remote()))
    peak_before = peak_rss(learner.pid)
    for entry in bad.values():
        client.xadd(stream_key(run_id), entry)
    rejected = wait_for(lambda: status(controller)["rejected"]
                        if sum(status(controller)["rejected"].values()) >= len(bad) else None)
    # every known reason is reported from 0; the ones injected once each, the rest 0
    assert {reason: n for reason, n in rejected.items() if n} == dict.fromkeys(bad, 1)
    assert set(bad) <= set(rejected)
    # the same learner took them all, its peak memory within 100 MB of what it was
    assert status(controller)["restarts"]["learner"] == 0
    assert learner.is_running()
    grown = peak_rss(learner.pid) - peak_before
    assert grown < 100 * 1024 * 1024, f"the learner's peak grew {grown / 2**20:.0f} MB"
    before = status(controller)["games_received"]
    wait_for(lambda: status(controller)["games_received"] > before)
    ray.get(controller.stop.remote())
    client.close()


def test_metrics_endpoint_serves_the_catalogue(local_ray, redis_server, run_id, tmp_path):
    import urllib.request

    controller = start_run(redis_server, run_id, tmp_path)
    wait_for(lambda: status(controller)["learner_steps"] > 0)
    url = status(controller)["metrics_url"]
    assert url.startswith("http://127.0.0.1:")
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    for name in ("zeroforge_selfplay_games_total", "zeroforge_learner_steps_total",
                 "zeroforge_actors_alive", "zeroforge_replay_window_positions"):
        assert name in text
    ray.get(controller.stop.remote())


def test_workers_can_use_inference_servers(local_ray, redis_server, run_id, tmp_path):
    controller = start_run(redis_server, run_id, tmp_path, "distributed.inference=server",
                           "distributed.inference_servers=1", "inference.num_cpus=0.25",
                           "selfplay.workers=2")
    assert status(controller)["inference"] == "server"
    wait_for(lambda: status(controller)["games_received"] >= 10)
    [server] = ray.get(controller.actor_handles.remote("inference"))
    snap = ray.get(server.stats.remote())
    requests = {tuple(map(tuple, k)): v for k, v in snap["values"]["inference_requests_total"]}
    assert requests[(("server", "0"),)] > 0
    # published weights reach the server, and the workers' games carry the new version
    wait_for(lambda: status(controller)["weights_version"] >= 2)
    workers = ray.get(controller.actor_handles.remote("selfplay"))
    # server-fed workers are an actor each under the default node hosts (their search
    # needs a core of its own: threads of one host would share one)
    assert len(workers) == 2

    def version(handle, component):
        snap = ray.get(handle.stats.remote())
        series = {tuple(map(tuple, k)): v for k, v in snap["values"]["weights_version"]}
        return series.get((("component", component),), 0)

    wait_for(lambda: version(server, "inference") >= 1)
    wait_for(lambda: version(workers[0], "selfplay") >= 1)
    ray.get(controller.scale.remote(inference_servers=2))
    wait_for(lambda: status(controller)["alive"]["inference"] == 2)
    before = status(controller)["games"]
    wait_for(lambda: status(controller)["games"] > before)
    final = ray.get(controller.stop.remote())
    assert final["games_received"] == final["games"]


def test_run_limit_ends_the_run_and_keeps_the_trained_checkpoint(
        local_ray, redis_server, run_id, tmp_path):
    """At run.max_learner_steps the controller stops the run in order (workers first, the
    learner's final drain last: every game appended is received, none is left in the
    stream, as once happened when the learner ended itself first), without starting a
    successor learner (which once overwrote the final checkpoint with untrained weights),
    and keeps the learner's counters in the final status."""
    from zeroforge.learner.learner import load_checkpoint

    controller = start_run(redis_server, run_id, tmp_path, "run.max_learner_steps=15")
    final = wait_for(lambda: (st := status(controller))["state"] == "stopped" and st)
    assert final["stopped_by"] == "limit"  # a run that trained nothing so exits 1
    assert final["restarts"]["learner"] == 0
    assert final["learner_steps"] >= 15
    saved = load_checkpoint(tmp_path / "checkpoint.pt")
    assert saved["counters"]["steps"] == final["learner_steps"]
    assert saved["extra"]["games_received"] == final["games_received"] > 0
    # the workers' own count of games appended: all of them were received
    workers = sum(v for _, v in ray.get(controller.metrics_snapshot.remote())["values"][
        "selfplay_games_total"])
    assert workers == final["games_received"]


def test_crash_loop_fails_the_run_in_one_line(local_ray, redis_server, run_id, tmp_path):
    """Actors that cannot even build their service (here: a wrong Redis password) are not
    replaced forever: past the kind's crash-loop limit the run fails, naming the kind and
    its last error, and nothing is left running."""
    config = load_train_config(None, SETTINGS)
    bad_url = redis_server.endpoint.replace("redis://", "redis://:wrong@", 1)
    ctx = dataclasses.replace(config.context(run_id, bad_url), run_dir=str(tmp_path))
    started = time.monotonic()
    controller = start_run_handle(config, ctx).actor
    _RUNS.append(controller)
    final = wait_for(lambda: (st := status(controller))["state"] == "failed" and st, 150)
    failed_s = time.monotonic() - started
    assert "actors crashed" in final["error"] and "credentials" in final["error"]
    assert final["error"].split()[0] in ("learner", "selfplay")
    assert len(final["error"].splitlines()) == 1 and final["stopped_by"] == "failure"
    assert sum(final["alive"].values()) == 0
    report(failed_s=failed_s, replaced=sum(final["restarts"].values()),
           error_lines=len(final["error"].splitlines()))
