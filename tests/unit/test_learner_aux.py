"""The learner trains KataGo's auxiliary heads (ownership and score) from real Go games
that carry their targets, and leaves them out for games without them."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.samples import GameSamples, decode, encode
from zeroforge.shared.search import SearchConfig, UniformEvaluator

AUX_NET = NetConfig(kind="resnet", channels=16, blocks=2, global_pool_every=2,
                    pool_channels=4, heads="pooled", policy_channels=4, value_channels=4,
                    value_hidden=(16,), ownership_head=True, score_head=True)


@cache
def games(spec: str, n: int = 24) -> list[GameSamples]:
    worker = SelfPlayWorker(make_game(spec), UniformEvaluator(), SearchConfig(num_simulations=8),
                            SelfPlayConfig(games_in_parallel=n), seed=5)
    return [decode(encode(g)) for g in worker.play_games(n)]


def learner(spec: str, net: NetConfig = AUX_NET, **changes) -> Learner:
    config = LearnerConfig(batch_size=64, lr=0.01, optimizer="adamw", min_replay=1,
                           samples_per_insert=0, replay_capacity=5000, seed=1, **changes)
    return Learner(config, spec, net)


def test_ownership_and_score_losses_fall_on_go_games():
    lr = learner("go:size=5")
    lr.add(games("go:size=5"))
    assert lr.replay.has_aux[:len(lr.replay)].all()
    losses = [lr.step() for _ in range(120)]
    first = {k: np.mean([m[k] for m in losses[:10]]) for k in ("ownership_loss", "score_loss")}
    last = {k: np.mean([m[k] for m in losses[-10:]]) for k in ("ownership_loss", "score_loss")}
    # the same steps with the aux parts weighted 0: the heads get no gradient
    control = learner("go:size=5", ownership_loss_weight=0.0, score_loss_weight=0.0)
    control.add(games("go:size=5"))
    untrained = [control.step() for _ in range(120)]
    kept = {k: np.mean([m[k] for m in untrained[-10:]]) for k in first}
    assert first["ownership_loss"] > 0.3  # about ln 2 for an untrained head
    assert last["ownership_loss"] < 0.9 * first["ownership_loss"], (first, last)
    assert last["ownership_loss"] < 0.9 * kept["ownership_loss"], (last, kept)
    assert last["score_loss"] < 0.6 * first["score_loss"], (first, last)
    assert last["score_loss"] < 0.6 * kept["score_loss"], (last, kept)
    assert losses[-1]["loss"] == pytest.approx(
        losses[-1]["policy_loss"] + losses[-1]["value_loss"]
        + 1.5 * losses[-1]["ownership_loss"] + 0.02 * losses[-1]["score_loss"], rel=1e-6)


def test_games_without_targets_train_no_aux_head():
    # gomoku has no territory: its games carry no ownership, the aux parts stay 0
    lr = learner("gomoku:size=5,k=4")
    lr.add(games("gomoku:size=5,k=4"))
    assert not lr.replay.has_aux[:len(lr.replay)].any()
    before = {k: v.clone() for k, v in lr.net.state_dict().items() if "ownership" in k}
    m = lr.step()
    assert m["ownership_loss"] == 0.0 and m["score_loss"] == 0.0 and m["policy_loss"] > 0
    after = lr.net.state_dict()
    # AdamW's weight decay moves every weight a little; the loss gave the head no gradient
    assert all((after[k] - v).abs().max() < 1e-3 for k, v in before.items())


def test_a_net_without_aux_heads_keeps_the_plain_window():
    lr = learner("go:size=5", NetConfig.preset("tiny"))
    assert not lr.aux and lr.replay.ownership.size == 0
    lr.add(games("go:size=5"))
    m = lr.step()
    assert m["ownership_loss"] == 0.0 and m["score_loss"] == 0.0


def test_aux_replay_survives_a_checkpoint(tmp_path):
    lr = learner("go:size=5")
    lr.add(games("go:size=5"))
    lr.step()
    path = lr.save(tmp_path / "checkpoint.pt")
    back = learner("go:size=5")
    back.restore(path)
    n = len(lr.replay)
    np.testing.assert_array_equal(back.replay.state_arrays()["ownership"],
                                  lr.replay.state_arrays()["ownership"])
    assert back.replay.has_aux[:n].all()
