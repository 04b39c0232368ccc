"""The replay window's auxiliary targets (ownership and score, from the mover's view):
stored only when asked for, mapped through the same symmetry as their observation, saved
and restored with the window, and absent from a checkpoint made before them."""

from __future__ import annotations

import numpy as np
import pytest

from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.losses import losses_from_sums, step_scales
from zeroforge.learner.replay import ReplayWindow
from zeroforge.shared.games import make_game
from zeroforge.shared.samples import GameSamples


def _game_with_aux(game, t: int, seed: int) -> GameSamples:
    rng = np.random.default_rng(seed)
    c, h, w = game.spec.obs_shape
    policy = rng.random((t, game.spec.num_actions)).astype(np.float32)
    policy /= policy.sum(axis=1, keepdims=True)
    ownership = rng.integers(-1, 2, (h, w)).astype(np.int8)
    return GameSamples(game=game.spec.spec_string, game_version=game.spec.version,
                       obs=rng.integers(0, 2, (t, c, h, w)).astype(np.uint8), policy=policy,
                       to_play=(np.arange(t) % 2).astype(np.int8), outcome=1,
                       ownership=ownership, score=float(ownership.sum()) - 0.5)


def test_ownership_follows_its_observation_through_every_symmetry():
    game = make_game("go:size=5")
    w = ReplayWindow(100, game.spec.obs_shape, game.spec.num_actions, game.symmetries(),
                     aux=True)
    g = _game_with_aux(game, 1, 0)
    # the ownership copies the mover's stones plane: a symmetry applied to one but not the
    # other shows as a mismatch
    g.ownership = g.obs[0, 0].astype(np.int8)
    g.score = float(g.ownership.sum()) - 0.5
    w.add(g)
    batch = w.sample_batch(200, np.random.default_rng(1))
    assert batch.ownership is not None and batch.has_aux is not None
    assert batch.has_aux.all()
    np.testing.assert_array_equal(batch.ownership, batch.obs[:, 0].astype(np.int8))
    # and the batch is not all one symmetry (augmentation is on)
    assert len({o.tobytes() for o in batch.ownership}) > 1


def test_targets_are_stored_from_the_movers_view():
    game = make_game("go:size=5")
    w = ReplayWindow(100, game.spec.obs_shape, game.spec.num_actions, aux=True)
    g = _game_with_aux(game, 4, 2)
    w.add(g)
    np.testing.assert_array_equal(w.ownership[:4], g.ownership_targets())
    np.testing.assert_allclose(w.score[:4], [g.score, -g.score, g.score, -g.score])
    # positions without the targets (e.g. pre-training) are flagged, not zero-trained
    w.add_arrays(g.obs[:2], g.policy[:2], np.zeros(2, np.float32))
    np.testing.assert_array_equal(w.has_aux[:6], [True] * 4 + [False] * 2)


def test_a_window_without_aux_keeps_nothing_extra():
    game = make_game("go:size=5")
    w = ReplayWindow(100, game.spec.obs_shape, game.spec.num_actions)
    w.add(_game_with_aux(game, 3, 0))
    batch = w.sample_batch(4, np.random.default_rng(0))
    assert batch.ownership is None and batch.score is None and batch.has_aux is None
    assert set(w.state_arrays()) == {"obs", "policy", "value", "inserted"}


@pytest.mark.parametrize("capacity", [5, 50])
def test_aux_arrays_survive_a_save_and_restore(capacity):
    game = make_game("go:size=5")
    w = ReplayWindow(capacity, game.spec.obs_shape, game.spec.num_actions, aux=True)
    for seed in range(4):  # 12 positions: wraps the small window
        w.add(_game_with_aux(game, 3, seed))
    w.add_arrays(np.zeros((1, *game.spec.obs_shape), np.uint8),
                 np.zeros((1, game.spec.num_actions), np.float32), [0.5])
    saved = w.state_arrays()
    back = ReplayWindow(capacity, game.spec.obs_shape, game.spec.num_actions, aux=True)
    back.load_arrays(saved)
    for name, arr in back.state_arrays().items():
        np.testing.assert_array_equal(arr, saved[name], err_msg=name)
    assert not back.state_arrays()["has_aux"][-1]


def test_a_checkpoint_from_before_aux_restores_without_targets():
    game = make_game("go:size=5")
    old = ReplayWindow(50, game.spec.obs_shape, game.spec.num_actions)
    old.add(_game_with_aux(game, 3, 0))
    new = ReplayWindow(50, game.spec.obs_shape, game.spec.num_actions, aux=True)
    new.load_arrays(old.state_arrays())
    assert len(new) == 3 and not new.has_aux[:3].any()
    np.testing.assert_array_equal(new.state_arrays()["obs"], old.state_arrays()["obs"])


def test_replica_scales_average_to_the_single_learners_loss():
    # R replicas each scale their shard's sums; the mean of the R losses is the global one
    r, batch, targets, aux, points = 4, 64, 50.0, 40.0, 81
    one = step_scales(1, batch, targets, aux, points)
    many = step_scales(r, batch, targets, aux, points)
    for a, b in zip(one, many, strict=True):
        assert b == pytest.approx(r * a)
    config = LearnerConfig(ownership_loss_weight=1.5, score_loss_weight=0.02)
    losses = losses_from_sums([100.0, 32.0, 90.0, 40 * 81 * 0.5, 400.0, 40.0], targets,
                              batch, points, 0.1, config)
    assert losses["policy_loss"] == pytest.approx(2.0)
    assert losses["value_loss"] == pytest.approx(0.5)
    assert losses["ownership_loss"] == pytest.approx(0.5)
    assert losses["score_loss"] == pytest.approx(10.0)
    assert losses["loss"] == pytest.approx(2.0 + 0.5 + 1.5 * 0.5 + 0.02 * 10.0)
