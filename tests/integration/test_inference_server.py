"""InferenceServer actors on a real local Ray, weights through a real Redis."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import ray
import torch

from zeroforge.actors.inference import InferenceServerConfig
from zeroforge.actors.selfplay import SelfPlayConfig, SelfPlayWorker
from zeroforge.actors.selfplay_groups import InFlightWorker
from zeroforge.deploy.ray.hosts import NoInferenceServerError, RemoteEvaluator, make_inference_actor
from zeroforge.deploy.ray.private_api import NICENESS_ENV, WORKER_NICENESS
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import RedisServer, WeightStore, connect

GAME = "tictactoe"
SPEC = make_game(GAME).spec
NET = NetConfig.preset("tiny")
# Half a CPU each: the module's Ray has two, and a test runs up to three actors at once.
SERVER = InferenceServerConfig(num_cpus=0.5, max_wait_ms=20, weights_poll_s=0.2)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    # the servers at niceness 0 as in a cluster zeroforge starts, whatever this test
    # process started before (Ray's default, 15, starves them beside a busy suite)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(NICENESS_ENV, WORKER_NICENESS)
        ray.init(address="local", num_cpus=2, include_dashboard=False,
                 logging_level=logging.WARNING, configure_logging=False)
        yield
        ray.shutdown()


def start_server(config: InferenceServerConfig = SERVER, redis_url: str | None = None,
                 run_id: str = "itest") -> Any:
    server = make_inference_actor(GAME, NET, config, redis_url, run_id)
    ray.get(server.ready.remote(), timeout=120)
    return server


def leaves(batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs = (rng.random((batch, *SPEC.obs_shape)) < 0.3).astype(np.uint8)
    return obs, np.ones((batch, SPEC.num_actions), bool)


def selfplay_client(servers: list, seed: int) -> dict:
    """A self-play worker in a Ray task, its network behind the servers. Returns plain
    data only: shapes and versions of the games it finished."""
    evaluator = RemoteEvaluator(servers)
    worker = SelfPlayWorker(make_game(GAME), evaluator, SearchConfig(num_simulations=8),
                            SelfPlayConfig(games_in_parallel=4), seed=seed)
    games = worker.play_games(4)
    return {"obs": [g.obs.shape for g in games], "policy": [g.policy.shape for g in games],
            "versions": [g.weights_version for g in games],
            "simulations": worker.stats.simulations}


def publish_and_await(store, evaluator, seed: int, obs: np.ndarray, legal: np.ndarray):
    """Publishes a fresh net (torch seed ``seed``) as version 1, evaluates ``obs`` until
    the answer comes from it and checks its numbers against that net; the answer."""
    torch.manual_seed(seed)
    net = build_net(NET, SPEC)
    store.publish(net, 1)
    published = time.monotonic()
    while (ev := evaluator.evaluate(obs, legal)).weights_version != 1:
        assert time.monotonic() - published < 10, "version 1 never reached the server"
        time.sleep(0.02)
    want = TorchEvaluator(net).evaluate(obs, legal)
    np.testing.assert_allclose(ev.policy_logits, want.policy_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ev.value, want.value, rtol=1e-4, atol=1e-5)
    return ev


def stat(snapshot: dict, name: str) -> float:
    return sum(v for _, v in snapshot["values"].get(name, []))


def test_two_selfplay_clients_share_one_server(ray_cluster: None) -> None:
    server = start_server()
    try:
        running = server.run.remote()  # as the controller supervises it
        client = ray.remote(num_cpus=0.5)(selfplay_client)
        results = ray.get([client.remote([server], seed) for seed in (1, 2)], timeout=300)
        for result in results:
            assert len(result["obs"]) >= 4
            for obs, policy in zip(result["obs"], result["policy"], strict=True):
                assert obs[1:] == SPEC.obs_shape and policy == (obs[0], SPEC.num_actions)
            assert result["versions"] == [0] * len(result["obs"])
        snap = ray.get(server.stats.remote())
        requests = stat(snap, "inference_requests_total")
        [[_, hist]] = snap["hists"]["inference_batch_size"]
        calls = sum(hist[:-1])
        # Each simulation round of a worker is one request (plus the root's).
        assert requests >= sum(r["simulations"] for r in results) / (4 * 8)
        assert calls < requests, "the two workers' requests were never merged"
        assert stat(snap, "nn_evaluations_total") == hist[-1]  # positions = batch size sum
        assert ray.wait([running], timeout=0)[0] == []
        server.stop.remote()
        assert ray.get(running, timeout=30) == requests
    finally:
        ray.kill(server)


def test_published_weights_reach_the_server(ray_cluster: None, redis_server: RedisServer,
                                            run_id: str) -> None:
    store = WeightStore(connect(redis_server.url), run_id)
    # A long poll interval: only the pub/sub announcement can bring new weights quickly.
    config = InferenceServerConfig(num_cpus=0.5, max_wait_ms=1, weights_poll_s=30)
    server = start_server(config, redis_server.url, run_id)
    late = None
    try:
        evaluator = RemoteEvaluator([server])
        obs, legal = leaves(5, 0)
        assert evaluator.evaluate(obs, legal).weights_version == 0
        publish_and_await(store, evaluator, 5, obs, legal)
        assert evaluator.weights_version == 1
        assert stat(ray.get(server.stats.remote()), "weights_version") == 1
        # A server started after the publish begins with the run's weights.
        late = start_server(config, redis_server.url, run_id)
        assert ray.get(late.ready.remote()) == 1
        # A malformed request fails for its caller only; the server keeps serving.
        with pytest.raises(ValueError, match="legal masks of shape"):
            evaluator.evaluate(obs, legal[:, :-1])
        assert evaluator.evaluate(obs, legal).weights_version == 1
    finally:
        ray.kill(server)
        if late is not None:
            ray.kill(late)


def test_remote_evaluator_fails_over_when_a_server_dies(
        ray_cluster: None, caplog: pytest.LogCaptureFixture) -> None:
    first, second = start_server(), start_server()
    third = None
    try:
        evaluator = RemoteEvaluator([first, second])
        obs, legal = leaves(3, 1)
        for _ in range(2):
            ev = evaluator.evaluate(obs, legal)
            assert ev.policy_logits.shape == (3, SPEC.num_actions) and ev.value.shape == (3,)
        ray.kill(first)
        with caplog.at_level(logging.WARNING, logger="zeroforge.actors.inference"):
            for _ in range(4):
                assert evaluator.evaluate(obs, legal).value.shape == (3,)
        gone = [r for r in caplog.records if "is gone" in r.getMessage()]
        assert len(gone) == 1 and "failing over to 1 other" in gone[0].getMessage()
        assert evaluator.servers == [second]
        ray.kill(second)
        evaluator.wait_for_servers_s = 1.0
        with pytest.raises(NoInferenceServerError, match="no new one handed over within 1 s"):
            evaluator.evaluate(obs, legal)
        # a stopping worker does not wait out the replacements
        stop = threading.Event()
        stopping = RemoteEvaluator([], wait_for_servers_s=300.0, stop=stop)
        threading.Timer(0.5, stop.set).start()
        began = time.monotonic()
        with pytest.raises(NoInferenceServerError, match="the worker is stopping"):
            stopping.evaluate(obs, legal)
        assert time.monotonic() - began < 10
        third = start_server()
        evaluator.set_servers([third])
        assert evaluator.evaluate(obs, legal).value.shape == (3,)
    finally:
        for server in (first, second, third):
            if server is not None:
                ray.kill(server)


def test_server_cache_hits_move_under_real_selfplay(ray_cluster: None) -> None:
    """Two self-play workers behind one server with an evaluation cache: repeated positions
    (within a worker's batches, across its moves and across the two workers) are answered
    from the cache, and only the rest reach the network."""
    config = InferenceServerConfig(num_cpus=0.5, max_wait_ms=20, weights_poll_s=0.2,
                                   cache_entries=5000)
    server = start_server(config)
    try:
        client = ray.remote(num_cpus=0.5)(selfplay_client)
        results = ray.get([client.remote([server], seed) for seed in (1, 2)], timeout=300)
        assert all(len(r["obs"]) >= 4 for r in results)
        snap = ray.get(server.stats.remote())
        [[_, hist]] = snap["hists"]["inference_batch_size"]
        lookups = stat(snap, "eval_cache_lookups_total")
        hits = stat(snap, "eval_cache_hits_total")
        assert lookups == hist[-1]  # every position served was looked up
        assert 0 < hits < lookups
        assert stat(snap, "nn_evaluations_total") == lookups - hits
    finally:
        ray.kill(server)


def test_server_cache_is_emptied_by_published_weights(ray_cluster: None,
                                                      redis_server: RedisServer,
                                                      run_id: str) -> None:
    store = WeightStore(connect(redis_server.url), run_id)
    config = InferenceServerConfig(num_cpus=0.5, max_wait_ms=1, weights_poll_s=30,
                                   cache_entries=1000)
    server = start_server(config, redis_server.url, run_id)
    try:
        evaluator = RemoteEvaluator([server])
        obs, legal = leaves(5, 1)
        first = evaluator.evaluate(obs, legal)
        again = evaluator.evaluate(obs, legal)  # from the cache: the same numbers
        np.testing.assert_array_equal(first.policy_logits, again.policy_logits)
        ev = publish_and_await(store, evaluator, 6, obs, legal)
        assert not np.allclose(ev.policy_logits, first.policy_logits, atol=1e-3)
        snap = ray.get(server.stats.remote())
        assert stat(snap, "eval_cache_hits_total") >= 5
    finally:
        ray.kill(server)


def test_a_worker_with_batches_in_flight_loses_no_request_when_its_server_restarts(
        ray_cluster: None, caplog: pytest.LogCaptureFixture) -> None:
    """Two groups of a worker keep requests in flight to their one server; it is killed
    mid-game and a replacement handed over a second later (as the controller does): the
    requests in flight are sent again to it, and the worker plays on without an error."""
    server = start_server()
    replacement = None
    evaluator = RemoteEvaluator([server])
    game = make_game(GAME)
    config = SelfPlayConfig(games_in_parallel=8, batches_in_flight=2)
    worker = InFlightWorker(8, 2, lambda slots, ids: SelfPlayWorker(
        game, evaluator, SearchConfig(num_simulations=16), config, seed=4, slots=slots,
        game_ids=ids))
    played: dict[str, Any] = {"games": [], "error": None}

    def play() -> None:
        try:
            while len(played["games"]) < 24:
                played["games"].extend(worker.play_moves(1))
        except BaseException as err:  # noqa: BLE001 - the test reads it
            played["error"] = err

    thread = threading.Thread(target=play)
    try:
        with caplog.at_level(logging.WARNING, logger="zeroforge.deploy.ray.hosts"):
            thread.start()
            while worker.stats.positions < 16:  # two moves in: requests are in flight
                time.sleep(0.01)
            ray.kill(server)
            time.sleep(1.0)
            replacement = start_server()
            evaluator.set_servers([replacement])
            thread.join(timeout=300)
        assert not thread.is_alive()
        assert played["error"] is None
        games = played["games"]
        assert len(games) >= 24 and len({g.game_id for g in games}) == len(games)
        for g in games:  # every position of every game got its answer
            assert len(g.obs) == len(g.policy) == len(g.to_play) >= 5
        assert stat(ray.get(replacement.stats.remote()), "inference_requests_total") > 0
        messages = [r.getMessage() for r in caplog.records]
        assert any("waiting up to" in m for m in messages)
    finally:
        ray.kill(server)
        if replacement is not None:
            ray.kill(replacement)
