"""Several board sizes in one run (``selfplay.board_sizes``): the config's checks, the
replay window of mixed sizes (batches of one size, that size's symmetries, checkpoint),
a learner step on mixed sizes (the ownership mean over the batch's own points), the
intake check and the self-play worker that plays the sizes in their shares. Real Go games
of 5x5 and 7x7 (the evaluation size), played by a uniform evaluator."""

from __future__ import annotations

import asyncio
import copy
from functools import cache

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.inference import InferenceServer, InferenceServerConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.actors.selfplay_sizes import MixedSizeWorker
from zeroforge.deploy.config import load_train_config
from zeroforge.learner.config import LearnerConfig
from zeroforge.learner.learner import Learner
from zeroforge.learner.losses import AuxTargets, loss_sums
from zeroforge.learner.replay import ReplayWindow
from zeroforge.learner.replay_sizes import MixedReplayWindow, split_capacity
from zeroforge.learner.sample_checks import REJECTION_REASONS, rejection
from zeroforge.shared import config as cfg
from zeroforge.shared.board_sizes import SizeMix, size_mix
from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.games import OPP, OWN, make_game
from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net
from zeroforge.shared.samples import GameSamples, decode, encode
from zeroforge.shared.search import SearchConfig, UniformEvaluator

EVAL = "go:size=7,obs=features"
MIX = size_mix(EVAL, (5, 7))
NET = NetConfig(kind="resnet", channels=16, blocks=2, global_pool_every=2, pool_channels=4,
                heads="pooled", policy_channels=4, value_channels=4, value_hidden=(16,),
                ownership_head=True, score_head=True)


@cache
def games(size: int, n: int = 12) -> tuple[GameSamples, ...]:
    """``n`` finished games of ``size``, through the wire format (as the learner gets them)."""
    assert MIX is not None
    worker = SelfPlayWorker(make_game(MIX.spec_for(size)), UniformEvaluator(),
                            SearchConfig(num_simulations=4),
                            SelfPlayConfig(games_in_parallel=n), seed=size)
    return tuple(decode(encode(g)) for g in worker.play_games(n))


def mixed_window(capacity: int = 10_000, shares: tuple[float, ...] = (0.5, 0.5)
                 ) -> MixedReplayWindow:
    assert MIX is not None
    return MixedReplayWindow(capacity, MIX.specs, shares, 7, aux=True)


# --- config ---------------------------------------------------------------------------------
def test_the_mix_of_a_config():
    c = load_train_config(None, [f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[5,7]",
                                 "selfplay.board_size_weights=[1,3]"])
    mix = c.context().size_mix()
    assert isinstance(mix, SizeMix)
    assert mix.sizes == (5, 7) and mix.shares == (0.25, 0.75)
    assert mix.specs == ("go:size=5,komi=7.5,ko=superko,obs=features",
                         "go:size=7,komi=7.5,ko=superko,obs=features")
    assert mix.eval_spec == mix.specs[1] and mix.size_of(mix.specs[0]) == 5
    # the run's own size alone, or no field, is a run of one size: no mix at all
    for sizes in ("[]", "[7]"):
        one = load_train_config(None, [f"game={EVAL}", f"selfplay.board_sizes={sizes}"])
        assert one.context().size_mix() is None


@pytest.mark.parametrize(("flags", "says"), [
    (["game=gomoku6", "net=go_cpu", "selfplay.board_sizes=[6,8]"],
     "needs a game with board sizes"),
    ([f"game={EVAL}", "net=small", "selfplay.board_sizes=[5,7]"],
     "needs a fully convolutional net (net.heads: pooled"),
    ([f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[3,7]"], "size 3: go size=3"),
    ([f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[7,7]"], "has a size twice"),
    ([f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[5,7]",
      "selfplay.board_size_weights=[1]"], "1 weights for 2 board_sizes"),
    ([f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[5,7]",
      "selfplay.board_size_weights=[1,0]"], "must be > 0"),
    ([f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[5,7]",
      "selfplay.backend=onnxruntime"], "needs selfplay.backend: torch"),
    ([f"game={EVAL}", "net=go_cpu", "selfplay.board_sizes=[5,7]",
      "inference.backend=openvino"], "needs inference.backend: torch"),
])
def test_a_config_that_cannot_mix_sizes_is_one_line(flags, says):
    with pytest.raises(cfg.ConfigError) as err:
        load_train_config(None, flags)
    assert says in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("config: ") and "selfplay." in str(err.value)


# --- replay window --------------------------------------------------------------------------
def test_the_window_keeps_each_size_apart_and_a_batch_is_of_one_size():
    w = mixed_window()
    for size in (5, 7):
        for g in games(size):
            w.add(g)
    held = w.positions_by_size()
    assert held == {s: sum(g.num_positions for g in games(s)) for s in (5, 7)}
    assert len(w) == w.inserted == sum(held.values())
    rng = np.random.default_rng(0)
    drawn = {5: 0, 7: 0}
    for _ in range(400):
        b = w.sample_batch(8, rng)
        size = b.obs.shape[2]
        assert b.obs.shape[1:] == (make_game(EVAL).spec.obs_shape[0], size, size)
        assert b.policy.shape == (8, size * size + 1)
        assert b.ownership is not None and b.ownership.shape == (8, size, size)
        drawn[size] += 1
    # sizes are drawn in proportion to the positions held (binomial, 400 draws: 5 sigma)
    share = held[5] / len(w)
    assert abs(drawn[5] / 400 - share) < 5 * np.sqrt(share * (1 - share) / 400), (drawn, held)


@pytest.mark.parametrize("size", [5, 7])
def test_augmentation_maps_a_batch_through_its_own_boards_symmetries(size):
    w = mixed_window()
    g = max(games(size), key=lambda g: g.num_positions)
    t = g.num_positions // 2
    # one position whose ownership target copies its own-stones plane: a symmetry applied
    # to one and not the other, or another board's, shows as a mismatch
    g = GameSamples(g.game, g.game_version, g.obs[t:t + 1], g.policy[t:t + 1],
                    g.to_play[:1], 1, ownership=g.obs[t, OWN].astype(np.int8), score=0.0)
    w.add(g)
    batch = w.sample_batch(200, np.random.default_rng(1))
    assert batch.ownership is not None and batch.obs.shape[2] == size
    np.testing.assert_array_equal(batch.ownership, batch.obs[:, OWN].astype(np.int8))
    assert len({o.tobytes() for o in batch.ownership}) > 1  # not all one symmetry
    # the policy went through the same map: its mass stays on the mapped empty points
    legal = np.concatenate([(batch.obs[:, OWN] | batch.obs[:, OPP]).reshape(200, -1) == 0,
                            np.ones((200, 1), bool)], axis=1)
    assert (np.where(legal, 0, batch.policy).sum(axis=1) < 1e-6).all()


def test_capacity_is_split_by_shares_and_the_window_survives_a_checkpoint():
    assert split_capacity(1000, (0.25, 0.75)) == [250, 750]
    assert sum(split_capacity(1001, (1 / 3, 2 / 3))) == 1001
    w = mixed_window(400, (0.25, 0.75))
    assert {s: p.capacity for s, p in w.parts.items()} == {5: 100, 7: 300}
    for size in (5, 7):
        for g in games(size):
            w.add(g)
    assert w.positions_by_size()[5] == 100  # full: the oldest 5x5 positions are gone
    state = w.state_arrays()
    assert "obs" in state and "size5.obs" in state and "size7.obs" not in state
    again = mixed_window(400, (0.25, 0.75))
    again.load_arrays(state)
    assert again.inserted == w.inserted and again.positions_by_size() == w.positions_by_size()
    a = w.sample_batch(16, np.random.default_rng(3))
    b = again.sample_batch(16, np.random.default_rng(3))
    for name in ("obs", "policy", "value", "ownership", "score"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_a_one_size_checkpoint_resumes_into_the_evaluation_sizes_part():
    spec = make_game(EVAL).spec
    plain = ReplayWindow(1000, spec.obs_shape, spec.num_actions, aux=True)
    for g in games(7):
        plain.add(g)
    w = mixed_window(2000)
    w.load_arrays(plain.state_arrays())
    assert w.positions_by_size() == {5: 0, 7: len(plain)} and w.inserted == plain.inserted
    for g in games(5):
        w.add(g)
    assert w.positions_by_size()[5] > 0


# --- learner --------------------------------------------------------------------------------
def mixed_learner(**changes) -> Learner:
    config = LearnerConfig(batch_size=32, lr=0.01, optimizer="adamw", min_replay=1,
                           samples_per_insert=0, replay_capacity=5000, seed=1, **changes)
    return Learner(config, EVAL, NET, MIX)


def test_a_learner_step_on_mixed_sizes_means_the_ownership_over_the_batchs_points():
    lr = mixed_learner()
    params = [id(p) for p in lr.net.parameters()]
    for size in (5, 7):
        lr.add(list(games(size)))
    seen = set()
    for _ in range(12):
        # the same batch and forward pass as the step's, on copies
        rng, net = copy.deepcopy(lr.rng), copy.deepcopy(lr.net)
        batch = lr.replay.sample_batch(32, rng, augment=True)
        size = batch.obs.shape[2]
        x = torch.as_tensor(batch.obs, dtype=torch.float32)
        with torch.no_grad():
            out = net(x, all_heads=True)
        aux = AuxTargets(torch.as_tensor(batch.ownership), torch.as_tensor(batch.score),
                         torch.as_tensor(batch.has_aux))
        sums = loss_sums(F.log_softmax(out.policy.float(), dim=1), out.value.float(),
                         torch.as_tensor(batch.policy), torch.as_tensor(batch.value),
                         out.ownership, out.score, aux)
        m = lr.step()
        seen.add(size)
        assert m["ownership_loss"] == pytest.approx(
            float(sums[3]) / (float(sums[5]) * size * size), rel=1e-4)
        assert m["policy_loss"] == pytest.approx(float(sums[0]) / 32, rel=1e-4)
    assert seen == {5, 7}
    assert [id(p) for p in lr.net.parameters()] == params  # one net, never rebuilt
    assert sum(lr.batches_by_size.values()) == 12 and set(lr.batches_by_size) == {5, 7}
    assert lr.new_batches_by_size() == lr.batches_by_size and lr.new_batches_by_size() == {}


def test_a_mixed_learner_resumes_its_window_counters_and_next_step(tmp_path):
    lr = mixed_learner()
    for size in (5, 7):
        lr.add(list(games(size)))
    for _ in range(3):
        lr.step()
    path = lr.save(tmp_path / "checkpoint.pt")
    again = mixed_learner()
    again.restore(path)
    assert again.replay.positions_by_size() == lr.replay.positions_by_size()
    assert again.batches_by_size == lr.batches_by_size
    assert again.new_batches_by_size() == {}  # the restored totals count as reported
    assert again.step() == pytest.approx(lr.step(), rel=1e-5)


# --- intake ---------------------------------------------------------------------------------
def test_the_intake_takes_the_runs_sizes_and_rejects_others_in_one_line():
    lr = mixed_learner()
    assert lr.rejection(games(5)[0]) == ("", None)
    assert lr.rejection(games(7)[0]) == ("", None)
    nine = SelfPlayWorker(make_game("go:size=9,obs=features"), UniformEvaluator(),
                          SearchConfig(num_simulations=2), SelfPlayConfig(games_in_parallel=1),
                          seed=0).play_games(1)[0]
    reason, why = lr.rejection(nine)
    assert reason == "wrong_size" and "wrong_size" in REJECTION_REASONS
    assert why is not None and "go:size=9" in why and "5x5, 7x7" in why and "\n" not in why
    # a 5x5 claim with 7x7 planes, and another game: wrong_game, as in any run
    forged = copy.deepcopy(games(7)[0])
    forged.game = MIX.spec_for(5)
    assert lr.rejection(forged)[0] == "wrong_game"
    other = copy.deepcopy(games(5)[0])
    other.game = "go:size=5,komi=6.5,ko=superko,obs=features"
    assert lr.rejection(other)[0] == "wrong_game"
    # a 5x5 game's rules are its own: a bad policy is caught at that size
    bad = copy.deepcopy(games(5)[0])
    bad.policy = bad.policy * 2
    assert lr.rejection(bad)[0] == "bad_policy"
    # a run of one size keeps calling another size wrong_game
    assert rejection(make_game(EVAL), games(5)[0])[0] == "wrong_game"


# --- self-play ------------------------------------------------------------------------------
def test_a_worker_deals_its_moves_to_the_sizes_in_their_shares():
    assert MIX is not None
    net = build_net(NET, make_game(EVAL).spec)
    evaluator = TorchEvaluator(net)
    worker = MixedSizeWorker(
        [make_game(s) for s in MIX.specs], (0.25, 0.75),
        lambda game, i: SelfPlayWorker(game, evaluator, SearchConfig(num_simulations=2),
                                       SelfPlayConfig(games_in_parallel=3), seed=i))
    finished = worker.play_moves(80)
    assert list(worker.moves) == [20, 60]
    # on until both sizes finished games (a 5x5 game lasts at most 50 moves)
    while len({g.obs.shape[2] for g in finished}) < 2 and worker.moves.sum() < 2000:
        finished += worker.play_moves(40)
    assert worker.moves[1] == 3 * worker.moves[0]
    assert worker.stats.positions == worker.moves.sum() * 3
    assert worker.stats.positions == sum(w.stats.positions for w in worker.parts.values())
    assert worker.stats.games == len(finished) == sum(w.stats.games for w in worker.parts.values())
    by_size = {5: 0, 7: 0}
    for g in finished:
        size = g.obs.shape[2]
        by_size[size] += 1
        assert g.game == MIX.spec_for(size) and g.policy.shape[1] == size * size + 1
        assert g.ownership is not None and g.ownership.shape == (size, size)
        assert rejection(make_game(g.game), decode(encode(g))) == ("", None)
    assert by_size[5] > 0 and by_size[7] > 0, by_size


# --- inference server -----------------------------------------------------------------------
@pytest.mark.parametrize("cache_entries", [0, 1000])
def test_an_inference_server_serves_every_size_one_board_per_network_call(cache_entries,
                                                                          caplog):
    assert MIX is not None
    net = build_net(NET, make_game(EVAL).spec)
    reference = TorchEvaluator(net)
    rng = np.random.default_rng(0)
    requests = []
    for k in range(16):  # the sizes interleaved, as workers of both send them
        size = (5, 7)[k % 2]
        c = make_game(EVAL).spec.obs_shape[0]
        requests.append(((rng.random((3, c, size, size)) < 0.2).astype(np.uint8),
                         rng.random((3, size * size + 1)) < 0.8))

    async def main() -> tuple[list, InferenceServer]:
        server = InferenceServer(EVAL, NET, InferenceServerConfig(
            device="cpu", max_wait_ms=100, cache_entries=cache_entries), None, "unit",
            size_specs=MIX.specs)
        await server.load_weights(weights_to_bytes(net), 2)
        answers = await asyncio.gather(*(server.evaluate(o, m) for o, m in requests))
        server.close()
        return answers, server

    answers, server = asyncio.run(main())
    for (logits, value, version), (obs, legal) in zip(answers, requests, strict=True):
        want = reference.evaluate(obs, legal)
        np.testing.assert_allclose(logits, want.policy_logits, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(value, want.value, rtol=1e-4, atol=1e-5)
        assert version == 2
    [[_, hist]] = server.stats()["hists"]["inference_batch_size"]
    assert sum(hist[:-1]) == 2  # one call per board shape, nothing retried alone
    assert not [r for r in caplog.records if "one by one" in r.getMessage()]
    # a server of one size refuses another's positions, for that caller only
    plain = InferenceServer(EVAL, NET, InferenceServerConfig(device="cpu"), None, "unit")
    with pytest.raises(ValueError, match="observations of shape"):
        asyncio.run(plain.evaluate(*requests[0]))
    plain.close()
