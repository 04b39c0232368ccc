"""Playout-cap games end to end over a real redis-server: a self-play worker with the cap
writes schema-2 entries, the learner service accepts every one (form, run and meaning
checks), and the replay window holds zero policy rows exactly at the fast moves."""

from __future__ import annotations

import numpy as np

from tests.integration.conftest import learner_service
from zeroforge.actors.selfplay import SelfPlayConfig, SelfPlayWorker
from zeroforge.deploy.config import RunConfig, TrainConfig
from zeroforge.learner.config import LearnerConfig
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net
from zeroforge.shared.search import SearchConfig
from zeroforge.shared.transport import SampleStream

GAME = "tictactoe"


def test_value_only_positions_cross_the_stream_and_train_only_the_value(
        redis_server, redis_client, run_id, tmp_path):
    search = SearchConfig(num_simulations=8, fast_simulations=2, full_search_prob=0.3)
    game = make_game(GAME)
    evaluator = TorchEvaluator(build_net(NetConfig.preset("tiny"), game.spec), device="cpu")
    worker = SelfPlayWorker(game, evaluator, search, SelfPlayConfig(games_in_parallel=8),
                            seed=4, worker_id="cap")
    games = worker.play_games(24)
    assert any(g.policy_recorded is not None for g in games)
    SampleStream(redis_client, run_id).append(games)

    config = TrainConfig(
        game=GAME, net=NetConfig.preset("tiny"), search=search,
        learner=LearnerConfig(batch_size=16, min_replay=16, samples_per_insert=1.0,
                              optimizer="adamw", lr=0.01, replay_capacity=5000, device="cpu",
                              train_steps_per_round=4, checkpoint_every_s=3600.0),
        run=RunConfig(torch_threads=1))
    service = learner_service(config, redis_server.url, run_id, str(tmp_path))
    for _ in range(50):
        turn = service.run_once(max_read=8, block_ms=0)
        if turn["read"] == 0 and turn["steps"] == 0:
            break
    assert sum(service.rejected.values()) == 0, service.rejected
    assert service.games_received == len(games)
    positions = sum(g.num_positions for g in games)
    replay = service.learner.replay
    assert replay.inserted == positions
    # Games enter the window in stream order: its rows line up with the games' positions.
    recorded = np.concatenate([g.policy_mask for g in games])
    sums = replay.policy[:positions].sum(axis=1)
    np.testing.assert_allclose(sums[recorded], 1.0, atol=2e-3)
    assert (sums[~recorded] == 0).all()
    assert service.learner.steps > 0
    service.stop()
