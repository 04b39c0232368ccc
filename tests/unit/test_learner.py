"""Replay window and Learner: ratios, augmentation, training (float32 and bfloat16) and
exact checkpoint resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zeroforge.learner.learner import CheckpointError, Learner, LearnerConfig
from zeroforge.learner.replay import ReplayWindow
from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig, native_bfloat16
from zeroforge.shared.samples import GameSamples


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


def board_symmetries(board: np.ndarray) -> list[np.ndarray]:
    """The 8 images of a square [..., N, N] array under rotations and reflections, worked out
    here with numpy rather than taken from the game, so the test checks the geometry too."""
    flipped = np.swapaxes(board, -1, -2)
    return ([np.rot90(board, k, axes=(-2, -1)) for k in range(4)]
            + [np.rot90(flipped, k, axes=(-2, -1)) for k in range(4)])


def test_augmentation_maps_obs_and_policy_together():
    """Each sampled position is its source under one board symmetry, its policy is the
    source's under that same symmetry, and every one of the 8 symmetries gets used."""
    game = make_game("gomoku:size=5,k=4")
    side, n = 5, 64
    rng = np.random.default_rng(0)
    obs = np.zeros((n, *game.spec.obs_shape), np.uint8)
    policy = np.zeros((n, game.spec.num_actions), np.float32)
    for i in range(n):
        # two marked stones and a policy over three points; redrawn until no symmetry but
        # the identity leaves the picture unchanged, so the symmetry used can be told
        while True:
            a, b, c = rng.choice(side * side, 3, replace=False)
            marks = np.zeros(side * side, np.int64)
            marks[a], marks[b], marks[c] = 1, 2, 4
            images = {img.tobytes() for img in board_symmetries(marks.reshape(side, side))}
            if len(images) == 8:
                break
        obs[i, 0].flat[a] = 1
        obs[i, 1].flat[b] = 1
        obs[i, 2].flat[c] = 1
        policy[i, [a, b, c]] = 0.5, 0.3, 0.2
    w = ReplayWindow(1000, game.spec.obs_shape, game.spec.num_actions, game.symmetries())
    w.add_arrays(obs, policy, np.arange(n, dtype=np.float32))  # value = source index
    s_obs, s_policy, s_value = w.sample(800, np.random.default_rng(1))
    used = np.zeros(8, np.int64)
    for o, p, v in zip(s_obs, s_policy, s_value, strict=True):
        i = int(v)
        hits = [k for k, img in enumerate(board_symmetries(obs[i])) if np.array_equal(img, o)]
        assert len(hits) == 1, f"sample from position {i} is no symmetry of it"
        k = hits[0]
        expected = board_symmetries(policy[i].reshape(side, side))[k].reshape(-1)
        np.testing.assert_array_equal(p, expected, err_msg=f"policy of position {i} was "
                                      "not mapped by the symmetry its observation went through")
        used[k] += 1
    # 800 draws over 8 symmetries: about 100 each; augmentation off would put all at k=0
    assert (used >= 40).all(), f"symmetries used: {used.tolist()}"


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
    # a file holding objects a checkpoint never does: refused unread, and the line never
    # passes on torch's advice to load it with weights_only=False
    torch.save({"format": "zeroforge-checkpoint", "x": CheckpointError("not data")},
               tmp_path / "objects.pt")
    with pytest.raises(CheckpointError, match="corrupt or not a checkpoint") as caught:
        lrn.restore(tmp_path / "objects.pt")
    line = str(caught.value)
    assert "can still be loaded" not in line and "weights" not in line.lower() and "\n" not in line
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a zeroforge-checkpoint"):
        lrn.restore(tmp_path / "other.pt")
    other = Learner(LearnerConfig(), "gomoku6", NetConfig.preset("tiny"))
    with pytest.raises(CheckpointError, match="checkpoint is for game 'tictactoe'"):
        other.restore(path)


def test_bfloat16_training_fits_and_keeps_float32_weights():
    """``precision: bfloat16`` runs the forward pass in bfloat16 autocast (its losses differ
    from float32's by rounding only) yet fits as well, and keeps float32 weights whose
    copies go into safetensors as they are (the CPU learner's layout is channels-last)."""
    runs = {p: make_learner(samples_per_insert=0, batch_size=32, lr=0.003, precision=p)
            for p in ("float32", "bfloat16")}
    first = {}
    for lrn in runs.values():
        lrn.add([one_hot_game(lrn.game, 64, s) for s in range(4)])
    for p, lrn in runs.items():
        first[p] = lrn.step()["loss"]
    assert first["bfloat16"] != first["float32"]
    assert first["bfloat16"] == pytest.approx(first["float32"], rel=0.05)
    lrn = runs["bfloat16"]
    assert lrn.dtype == torch.bfloat16
    for _ in range(150):
        last = lrn.step()["loss"]
    assert last < 0.5 * first["bfloat16"]
    weights = lrn.weights()
    assert all(t.dtype == torch.float32 and t.is_contiguous() for t in weights.values()
               if t.is_floating_point())
    assert weights_to_bytes(weights)  # safetensors refuses non-contiguous tensors


def test_learner_precision_is_validated_and_fast_follows_the_device():
    with pytest.raises(ValueError, match="learner.precision must be one of"):
        LearnerConfig(precision="float16")
    with pytest.raises(ValueError, match="learner.precision must be one of"):
        LearnerConfig(precision="half")
    fast = make_learner(precision="fast")
    assert fast.dtype == (torch.bfloat16 if native_bfloat16(torch.device("cpu"))
                          else torch.float32)
    assert make_learner(precision="auto").dtype == torch.float32
