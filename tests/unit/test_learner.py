"""Replay window and Learner: ratios, augmentation, training and exact checkpoint resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learner.learner import CheckpointError, Learner, LearnerConfig
from learner.replay import ReplayWindow
from shared.games import make_game
from shared.nets import NetConfig
from shared.samples import GameSamples


def one_hot_game(game, t: int, seed: int) -> GameSamples:
    """Positions whose only own stone sits where the policy points: augmentation must keep
    them together."""
    rng = np.random.default_rng(seed)
    c, h, w = game.spec.obs_shape
    points = rng.integers(0, h * w, t)
    obs = np.zeros((t, c, h, w), np.uint8)
    obs[np.arange(t), 0, points // w, points % w] = 1
    policy = np.zeros((t, game.spec.num_actions), np.float32)
    policy[np.arange(t), points] = 1
    return GameSamples(game.spec.spec_string, game.spec.version, obs, policy,
                       (np.arange(t) % 2).astype(np.int8), outcome=1, game_id=f"g{seed}")


def test_replay_ring_keeps_the_newest():
    w = ReplayWindow(10, (1, 2, 2), 4)
    for i in range(4):
        w.add_arrays(np.full((4, 1, 2, 2), i, np.uint8), np.zeros((4, 4), np.float32),
                     np.full(4, i, np.float32))
    assert len(w) == 10 and w.inserted == 16
    arrays = w.state_arrays()
    np.testing.assert_array_equal(arrays["value"], [1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    w2 = ReplayWindow(10, (1, 2, 2), 4)
    w2.load_arrays(arrays)
    np.testing.assert_array_equal(w2.state_arrays()["value"], arrays["value"])
    assert w2.inserted == 16
    w.add_arrays(np.zeros((1, 1, 2, 2), np.uint8), np.zeros((1, 4), np.float32), [9.0])
    w2.add_arrays(np.zeros((1, 1, 2, 2), np.uint8), np.zeros((1, 4), np.float32), [9.0])
    np.testing.assert_array_equal(w.state_arrays()["value"], w2.state_arrays()["value"])


def test_augmentation_maps_obs_and_policy_together():
    game = make_game("gomoku:width=5,height=5,k=4")
    w = ReplayWindow(1000, game.spec.obs_shape, game.spec.num_actions, game.symmetries())
    w.add(one_hot_game(game, 200, 0))
    obs, policy, _ = w.sample(500, np.random.default_rng(1))
    stone = obs[:, 0].reshape(500, -1).argmax(axis=1)
    np.testing.assert_array_equal(stone, policy.argmax(axis=1))
    unaugmented = w.obs[: len(w)][:, 0].reshape(len(w), -1).argmax(axis=1)
    # some samples really were moved by a non-identity symmetry
    assert not set(stone.tolist()) <= set(unaugmented.tolist()) or len(set(stone)) > 1


def make_learner(**kw) -> Learner:
    base = dict(batch_size=16, min_replay=20, samples_per_insert=2.0, lr=0.01,
                optimizer="adamw", replay_capacity=500)
    base.update(kw)
    return Learner(LearnerConfig(**base), "tictactoe", NetConfig.preset("tiny"))


def test_samples_per_insert_and_min_replay_gate_training():
    lrn = make_learner()
    game = lrn.game
    lrn.add([one_hot_game(game, 9, 0)])
    assert not lrn.can_train()                     # 9 < min_replay
    lrn.add([one_hot_game(game, 16, 1)])           # 25 positions: budget 2 * 25 = 50
    steps = lrn.train_available(100)
    assert len(steps) == 3 and lrn.samples_trained == 48
    assert not lrn.can_train()
    lrn.add([one_hot_game(game, 8, 2)])            # budget 66: one more batch of 16
    assert len(lrn.train_available(100)) == 1


def test_training_fits_fixed_targets():
    lrn = make_learner(samples_per_insert=0, batch_size=32, lr=0.003)
    lrn.add([one_hot_game(lrn.game, 64, s) for s in range(4)])
    first = lrn.step()["loss"]
    for _ in range(150):
        last = lrn.step()["loss"]
    assert last < 0.5 * first


def test_checkpoint_resume_is_exact(tmp_path):
    a = make_learner(samples_per_insert=0)
    a.add([one_hot_game(a.game, 30, s) for s in range(3)])
    a.train_available(5)
    a.publish()
    path = a.save(tmp_path / "ck.pt")
    b = make_learner(samples_per_insert=0)
    b.restore(path)
    assert (b.steps, b.samples_trained, b.games_seen, b.version) == (5, 80, 3, 1)
    assert b.replay.inserted == a.replay.inserted
    np.testing.assert_array_equal(b.replay.state_arrays()["obs"], a.replay.state_arrays()["obs"])
    # the next step is the same step: weights, optimizer moments and sampling RNG restored
    la, lb = a.step(), b.step()
    assert la == pytest.approx(lb, rel=1e-6)
    for (ka, va), (kb, vb) in zip(a.net.state_dict().items(), b.net.state_dict().items(),
                                  strict=True):
        assert ka == kb and torch.allclose(va, vb)


def test_bad_checkpoints_are_named(tmp_path):
    lrn = make_learner()
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        lrn.restore(tmp_path / "missing.pt")
    path = lrn.save(tmp_path / "ck.pt")
    data = path.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="corrupt or not a checkpoint"):
        lrn.restore(tmp_path / "cut.pt")
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a zeroforge-checkpoint"):
        lrn.restore(tmp_path / "other.pt")
    other = Learner(LearnerConfig(), "gomoku6", NetConfig.preset("tiny"))
    with pytest.raises(CheckpointError, match="checkpoint is for game 'tictactoe'"):
        other.restore(path)
