"""A run of two board sizes (``selfplay.board_sizes``) over a real redis-server: a
self-play service plays 5x5 and 7x7 into the stream, the learner service takes both,
rejects a 9x9 game of the same Go in one line (``wrong_size``, counted, never fatal),
trains on both sizes, reports the mix in its metrics and status, and a restarted learner
resumes the mixed window from its checkpoint."""

from __future__ import annotations

import dataclasses

from tests.integration.conftest import learner_service
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.deploy.runtime.builder import build_selfplay
from zeroforge.learner.config import LearnerConfig
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import open_transport

NET = NetConfig(kind="resnet", channels=8, blocks=2, global_pool_every=2, pool_channels=4,
                heads="pooled", policy_channels=4, value_channels=4, value_hidden=(8,),
                ownership_head=True, score_head=True)


def config(sizes: tuple[int, ...] = (5, 7)) -> TrainConfig:
    return TrainConfig(
        game="go:size=7,obs=features", net=NET, search=SearchConfig(num_simulations=4),
        selfplay=SelfPlayConfig(games_in_parallel=4, board_sizes=sizes,
                                eval_cache_entries=500, record_every=0),
        learner=LearnerConfig(batch_size=16, min_replay=32, samples_per_insert=0, lr=0.01,
                              replay_capacity=4000, device="cpu", train_steps_per_round=10,
                              checkpoint_every_s=3600.0),
        run=RunConfig(torch_threads=1))


def series(snapshot: dict, name: str) -> dict[str, float]:
    return {dict(map(tuple, labels)).get("board_size", ""): v
            for labels, v in snapshot["values"].get(name, [])}


def test_two_sizes_flow_from_self_play_through_the_stream_into_training(
        redis_server, redis_client, run_id, tmp_path, caplog):
    c = config()
    learner = learner_service(c, redis_server.url, run_id, str(tmp_path))
    ctx = dataclasses.replace(c.context(run_id, redis_server.url), run_dir=str(tmp_path))
    worker = build_selfplay(c, ctx, open_transport(redis_server.url, run_id), 0)
    parts = worker.worker.parts
    while min(parts[5].stats.games, parts[7].stats.games) == 0 or worker.appended < 12:
        worker.run_once(8)
    # a 9x9 game of the same Go, from a worker of another config: not this run's size
    nine = dataclasses.replace(config(()), game="go:size=9,obs=features")
    stray = build_selfplay(nine, nine.context(run_id, redis_server.url),
                           open_transport(redis_server.url, run_id), 1)
    while stray.appended == 0:
        stray.run_once(20)
    with caplog.at_level("WARNING"):
        for _ in range(20):
            learner.run_once(max_read=64, block_ms=0)
    assert learner.rejected["wrong_size"] == stray.appended
    lines = [r.getMessage() for r in caplog.records if "a board size this run does not play"
             in r.getMessage()]
    assert len(lines) == stray.appended and all("\n" not in m for m in lines)
    assert learner.games_received == worker.appended
    held = learner.learner.replay.positions_by_size()
    assert held[5] > 0 and held[7] > 0
    assert learner.learner.steps > 0 and set(learner.learner.batches_by_size) == {5, 7}
    stats = learner.stats()
    assert series(stats, "replay_window_positions_by_size") == {"5": held[5], "7": held[7]}
    assert series(stats, "learner_batches_by_size_total") == {
        str(k): v for k, v in learner.learner.batches_by_size.items()}
    status = learner.status()
    assert status["replay_positions_by_size"] == {"5": held[5], "7": held[7]}
    # the worker's metrics count both sizes' positions, once
    [[_, played]] = worker.stats()["values"]["selfplay_positions_total"]
    assert played == worker.worker.stats.positions == 4 * worker.worker.moves.sum()
    # a restarted learner resumes the mixed window and its counters
    learner.checkpoint()
    steps, batches = learner.learner.steps, dict(learner.learner.batches_by_size)
    learner.stop()
    again = learner_service(c, redis_server.url, run_id, str(tmp_path))
    assert again.learner.replay.positions_by_size() == held
    assert again.learner.steps == steps and again.learner.batches_by_size == batches
    assert series(again.stats(), "learner_batches_by_size_total") == {
        str(k): v for k, v in batches.items()}
    again.stop()


def test_a_run_of_one_size_calls_another_size_wrong_game(redis_server, run_id, tmp_path):
    c = dataclasses.replace(config(()), game="go:size=5,obs=features")
    learner = learner_service(c, redis_server.url, run_id, str(tmp_path))
    seven = config(())
    other = build_selfplay(seven, seven.context(run_id, redis_server.url),
                           open_transport(redis_server.url, run_id), 0)
    while other.appended == 0:
        other.run_once(20)
    for _ in range(5):
        learner.run_once(max_read=64, block_ms=0)
    assert learner.rejected == {"wrong_game": other.appended}
    assert "replay_positions_by_size" not in learner.status()
    learner.stop()



def test_a_distributed_run_serves_both_sizes_from_its_inference_server(
        local_ray, redis_server, run_id, tmp_path):
    """Real Ray: the controller hands the server the run's sizes, the workers' 5x5 and
    7x7 leaf batches share it (one board shape per network call), the learner trains
    both, and the run's status shows the mix."""
    import ray

    from tests.integration.test_distributed import SETTINGS, wait_for
    from zeroforge.deploy.config import load_train_config
    from zeroforge.deploy.ray.handle import start_run

    c = load_train_config(None, [
        *SETTINGS, "game=go:size=7,obs=features", "net=go_cpu", "search.num_simulations=4",
        "selfplay.games_in_parallel=4", "selfplay.board_sizes=[5,7]",
        "learner.batch_size=16", "learner.min_replay=32",
        "distributed.inference=server", "distributed.inference_servers=1",
        "inference.num_cpus=0.25"])
    ctx = dataclasses.replace(c.context(run_id, redis_server.url), run_dir=str(tmp_path))
    controller = start_run(c, ctx).actor
    try:
        def mixed() -> dict | None:
            st = ray.get(controller.status.remote())
            sizes = st["batches_by_size"]
            return st if sizes.get("5", 0) > 0 and sizes.get("7", 0) > 0 else None

        st = wait_for(mixed, timeout=300)
        assert st["inference"] == "server" and not any(st["restarts"].values())
        assert set(st["replay_by_size"]) == {"5", "7"}
        assert st["rejected"].get("wrong_size", 0) == 0
        [server] = ray.get(controller.actor_handles.remote("inference"))
        snap = ray.get(server.stats.remote())
        [[_, requests]] = snap["values"]["inference_requests_total"]
        assert requests > 0
        final = ray.get(controller.stop.remote())
        assert final["games_received"] == final["games"]
    finally:
        ray.get(controller.shutdown.remote())
        ray.kill(controller)
