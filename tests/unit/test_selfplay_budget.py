"""Self-play budget: tree reuse with a re-noised root, and playout-cap randomisation from
the search call through the sample format and checks to the learner's loss."""

from __future__ import annotations

import copy
import dataclasses
import functools

import msgpack
import numpy as np
import pytest
import torch

from tests.fakes import TTT
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.learner.learner import Learner, LearnerConfig
from zeroforge.learner.sample_checks import check_game
from zeroforge.shared.config import ConfigError, from_dict
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import NetConfig
from zeroforge.shared.samples import GameSamples, SampleFormatError, decode, encode
from zeroforge.shared.search import (
    ILLEGAL,
    MCTS,
    Evaluation,
    SearchConfig,
    UniformEvaluator,
    dirichlet_noise,
)

GOMOKU = make_game("gomoku6")


class HashedPriorEvaluator:
    """Non-uniform priors that depend on the position (a fixed random projection of the
    observation), value 0: so clean priors, noise and kept subtrees can be told apart."""

    def __init__(self, game, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        size = int(np.prod(game.spec.obs_shape))
        self.weights = rng.normal(size=(size, game.spec.num_actions)).astype(np.float32)

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        flat = obs.reshape(obs.shape[0], -1).astype(np.float32)
        return Evaluation(flat @ self.weights, np.zeros(obs.shape[0], np.float32))


def rngs(seed: int, batch: int) -> list[np.random.Generator]:
    return [np.random.default_rng([seed, b]) for b in range(batch)]


# --- tree reuse -----------------------------------------------------------------------
def test_a_reused_root_keeps_clean_priors_and_is_noised_afresh_like_a_new_root():
    evaluator = HashedPriorEvaluator(GOMOKU)
    noisy = SearchConfig(num_simulations=60, reuse_tree=True, dirichlet_fraction=0.5,
                         take_immediate_wins=False)
    mcts = MCTS(GOMOKU, evaluator, noisy)
    root = GOMOKU.init(2)
    first = mcts.search(root, rngs(0, 2))
    mcts.advance(first.action)
    child = GOMOKU.step(root, first.action)
    assert (mcts.tree.num_nodes > 0).all()  # both subtrees kept
    kept = mcts.tree.visits[:, 0].copy()
    # The kept root's stored priors are the network's, not the old root's noisy ones.
    clean = MCTS(GOMOKU, evaluator, SearchConfig(num_simulations=1, add_noise=False))
    clean.search(child, rngs(9, 2))
    np.testing.assert_allclose(mcts.tree.prior[:, 0], clean.tree.prior[:, 0], atol=1e-6)
    reused = mcts.search(child, rngs(1, 2))
    # Fresh noise on the clean priors: exactly the root priors a new tree would use with
    # the same generators (same draw order), and not the clean priors themselves.
    fresh = MCTS(GOMOKU, evaluator, noisy)
    fresh.search(child, rngs(1, 2))
    np.testing.assert_array_equal(mcts.root_prior, fresh.root_prior)
    legal = clean.tree.children[:, 0] != ILLEGAL
    expected = dirichlet_noise(clean.tree.prior[:, 0], legal, rngs(1, 2), None, 0.5)
    np.testing.assert_allclose(mcts.root_prior, expected, atol=1e-6)
    assert np.abs(mcts.root_prior - clean.tree.prior[:, 0]).max() > 0.01
    # The kept visits carried over: the root's children hold them plus the new ones.
    np.testing.assert_array_equal(reused.visit_counts.sum(axis=1), kept - 1 + 60)
    # A root searched again (same position, tree kept) is noised from the clean priors
    # again, not on top of the last search's noise.
    np.testing.assert_allclose(mcts.tree.prior[:, 0], clean.tree.prior[:, 0], atol=1e-6)
    mcts.search(child, rngs(2, 2))
    assert mcts.tree.visits[0, 0] == kept[0] + 120
    expected = dirichlet_noise(clean.tree.prior[:, 0], legal, rngs(2, 2), None, 0.5)
    np.testing.assert_allclose(mcts.root_prior, expected, atol=1e-6)


def test_without_reuse_a_search_after_advance_equals_a_fresh_search():
    evaluator = HashedPriorEvaluator(GOMOKU, seed=3)
    config = SearchConfig(num_simulations=40)
    mcts = MCTS(GOMOKU, evaluator, config)
    root = GOMOKU.init(3)
    first = mcts.search(root, rngs(0, 3))
    mcts.advance(first.action)
    child = GOMOKU.step(root, first.action)
    again = mcts.search(child, rngs(1, 3))
    fresh = MCTS(GOMOKU, evaluator, config).search(child, rngs(1, 3))
    for name in ("action", "visit_policy", "root_value", "visit_counts"):
        np.testing.assert_array_equal(getattr(again, name), getattr(fresh, name))


def test_selfplay_with_reuse_carries_the_played_subtrees_visits_over():
    sims = 24
    worker = SelfPlayWorker(GOMOKU, HashedPriorEvaluator(GOMOKU),
                            SearchConfig(num_simulations=sims, reuse_tree=True),
                            SelfPlayConfig(games_in_parallel=4), seed=1)
    worker.play_moves(1)
    tree = worker.mcts.tree
    kept = np.where(tree.num_nodes > 0, tree.visits[:, 0], 0)
    assert kept.sum() > 0
    worker.play_moves(1)
    # Each kept root brings its visits minus its own evaluation to its children.
    assert worker.stats.reused_visits == int(np.maximum(kept - 1, 0).sum())
    off = SelfPlayWorker(GOMOKU, HashedPriorEvaluator(GOMOKU), SearchConfig(num_simulations=sims),
                         SelfPlayConfig(games_in_parallel=4), seed=1)
    off.play_moves(2)
    assert off.stats.reused_visits == 0


# --- playout-cap randomisation: config ------------------------------------------------
@pytest.mark.parametrize("fields, message", [
    ({"full_search_prob": 0.0}, "full_search_prob must be in (0, 1], got 0.0"),
    ({"full_search_prob": 1.5}, "full_search_prob must be in (0, 1], got 1.5"),
    ({"fast_simulations": 0}, "fast_simulations must be in [1, num_simulations=200]"),
    ({"num_simulations": 50, "fast_simulations": 51},
     "fast_simulations must be in [1, num_simulations=50] or None, got 51"),
])
def test_bad_playout_cap_settings_are_one_line_errors(fields, message):
    with pytest.raises(ConfigError) as err:
        from_dict(SearchConfig, fields, "search")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_fast_budget_defaults_to_a_sixth_and_the_cap_is_off_by_default():
    assert not SearchConfig().playout_cap and not SearchConfig().reuse_tree
    assert SearchConfig(num_simulations=600).fast_budget == 100
    assert SearchConfig(num_simulations=3).fast_budget == 1
    assert SearchConfig(num_simulations=600, fast_simulations=50).fast_budget == 50


# --- playout-cap randomisation: self-play ---------------------------------------------
def spied_worker(game, config: SearchConfig, batch: int, seed: int = 0):
    """A worker whose search calls are recorded as (simulations, noise, visit counts)."""
    worker = SelfPlayWorker(game, UniformEvaluator(), config,
                            SelfPlayConfig(games_in_parallel=batch), seed=seed)
    calls: list[tuple[int, bool, np.ndarray]] = []
    search = worker.mcts.search

    def spy(states, rng, num_simulations=None, add_noise=None):
        result = search(states, rng, num_simulations=num_simulations, add_noise=add_noise)
        calls.append((num_simulations, add_noise, result.visit_counts.copy()))
        return result

    worker.mcts.search = spy  # type: ignore[method-assign]
    return worker, calls


def test_the_share_of_full_searches_is_the_configured_probability():
    config = SearchConfig(num_simulations=6, fast_simulations=2, full_search_prob=0.25)
    worker, calls = spied_worker(TTT, config, batch=2, seed=5)
    worker.play_moves(800)
    full = np.array([sims == 6 for sims, _, _ in calls])
    assert full.size == 800
    # 800 draws: the standard error of the share is 1.5%; 3.3 of them either side.
    assert abs(full.mean() - 0.25) < 0.05
    assert worker.stats.policy_targets == 2 * full.sum()
    assert worker.stats.simulations == 2 * (6 * full.sum() + 2 * (~full).sum())


def test_fast_moves_use_the_small_budget_without_noise_and_record_no_policy():
    config = SearchConfig(num_simulations=30, fast_simulations=5, full_search_prob=0.5,
                          take_immediate_wins=False)
    worker, calls = spied_worker(TTT, config, batch=3, seed=2)
    games = worker.play_games(6)
    assert {(sims, noise) for sims, noise, _ in calls} == {(30, True), (5, False)}
    for _, _, counts in calls:  # fresh trees: the root's children hold exactly the budget
        assert set(counts.sum(axis=1)) <= {30, 5}
    assert any(g.policy_recorded is not None for g in games)
    for g in games:
        mask = g.policy_mask
        np.testing.assert_allclose(g.policy[mask].sum(axis=1), 1.0, atol=1e-5)
        assert (g.policy[~mask] == 0).all()
        check_game(TTT, g)  # the semantic checks accept value-only positions


def test_policy_targets_are_the_full_searches_visit_shares_in_order():
    config = SearchConfig(num_simulations=12, fast_simulations=3, full_search_prob=0.4,
                          take_immediate_wins=False)
    worker, calls = spied_worker(TTT, config, batch=1, seed=7)
    (game,) = worker.play_games(1)
    assert len(calls) == game.num_positions
    for t, (sims, _, counts) in enumerate(calls):
        assert game.policy_mask[t] == (sims == 12)
        if sims == 12:
            np.testing.assert_allclose(game.policy[t], counts[0] / counts[0].sum(), atol=1e-6)


def test_without_the_cap_every_move_is_full_and_samples_are_schema_1():
    worker, calls = spied_worker(TTT, SearchConfig(num_simulations=8), batch=2)
    games = worker.play_games(2)
    assert {sims for sims, _, _ in calls} == {8}
    assert all(g.policy_recorded is None for g in games)
    assert msgpack.unpackb(encode(games[0]))["schema"] == 1


# --- sample format and checks ---------------------------------------------------------
@functools.cache
def _played_game() -> GameSamples:
    config = SearchConfig(num_simulations=8)
    (game,) = SelfPlayWorker(TTT, UniformEvaluator(), config,
                             SelfPlayConfig(games_in_parallel=1), seed=3).play_games(1)
    return game


def value_only_game(recorded: list[bool]) -> GameSamples:
    """A real tic-tac-toe self-play game with the positions ``recorded`` (repeated) flagged
    as having a policy target and zero policy rows elsewhere."""
    game = copy.deepcopy(_played_game())
    mask = np.array((recorded * 9)[:game.num_positions], bool)
    game.policy = np.where(mask[:, None], game.policy, 0.0).astype(np.float32)
    game.policy_recorded = mask
    return game


def test_flagged_games_round_trip_as_schema_2_and_carry_only_recorded_rows():
    game = value_only_game([True, False, False])
    data = encode(game)
    entry = msgpack.unpackb(data)
    assert entry["schema"] == 2
    assert len(entry["policy"]) == game.policy_mask.sum() * 9 * 2
    back = decode(data)
    np.testing.assert_array_equal(back.policy_recorded, game.policy_recorded)
    np.testing.assert_allclose(back.policy, game.policy, atol=1e-3)
    check_game(TTT, back)


def test_schema_1_entries_still_decode_as_fully_recorded():
    game = value_only_game([True])
    game.policy_recorded = None
    back = decode(encode(game))
    assert back.policy_recorded is None and back.policy_mask.all()


@pytest.mark.parametrize("flags, reason", [
    (lambda t: ..., "missing_field"),
    (lambda t: "yes", "bad_field"),
    (lambda t: b"\x01" * (t - 1), "bad_length"),
    (lambda t: b"\x02" * t, "bad_field"),
    (lambda t: b"\x01" * t, "bad_length"),  # every row flagged, fewer rows carried
])
def test_bad_flags_are_rejected_with_a_reason(flags, reason):
    entry = msgpack.unpackb(encode(value_only_game([False, True])), raw=False)
    entry["policy_recorded"] = flags(entry["positions"])
    data = msgpack.packb({k: v for k, v in entry.items() if v is not ...}, use_bin_type=True)
    with pytest.raises(SampleFormatError) as err:
        decode(data)
    assert err.value.reason == reason


def test_checks_still_reject_a_bad_recorded_row_and_name_its_position():
    game = value_only_game([False, True])
    game.policy[3] = 0.0  # a recorded row that is not a distribution
    with pytest.raises(SampleFormatError, match="policy of position 3 sums to 0"):
        check_game(TTT, game)
    game.policy_recorded = game.policy_mask[:-1]
    with pytest.raises(SampleFormatError) as err:
        check_game(TTT, game)
    assert err.value.reason == "bad_length"


# --- learner --------------------------------------------------------------------------
def make_learner() -> Learner:
    config = LearnerConfig(batch_size=64, min_replay=1, samples_per_insert=0, lr=0.01,
                           optimizer="adamw", replay_capacity=500, augment=False)
    return Learner(config, "tictactoe", NetConfig.preset("tiny"))


def flagged_games(seed: int, unrecorded_policy: str, recorded_policy: str = "search"
                  ) -> list[GameSamples]:
    games = []
    rng = np.random.default_rng(seed)
    for i in range(8):
        g = value_only_game([True, False])
        g.game_id = f"g{i}"
        mask = g.policy_mask
        if unrecorded_policy == "random":  # whatever sits in a flagged row must not matter
            noise = rng.random(g.policy.shape).astype(np.float32)
            g.policy[~mask] = (noise / noise.sum(axis=1, keepdims=True))[~mask]
        if recorded_policy == "uniform":
            g.policy[mask] = 1.0 / g.policy.shape[1]
        games.append(g)
    return games


def losses(games: list[GameSamples], steps: int = 1) -> list[dict[str, float]]:
    learner = make_learner()
    learner.add(games)
    return [learner.step() for _ in range(steps)]


def test_the_policy_loss_ignores_the_policy_of_value_only_positions():
    base = losses(flagged_games(0, "zeros"))
    changed = losses(flagged_games(0, "random"))
    assert [m["loss"] for m in changed] == [m["loss"] for m in base]
    assert [m["policy_loss"] for m in changed] == [m["policy_loss"] for m in base]
    # ... while the recorded positions' policies do count (the comparison can fail).
    other = losses(flagged_games(0, "zeros", recorded_policy="uniform"))
    assert other[0]["policy_loss"] != pytest.approx(base[0]["policy_loss"], rel=1e-3)


def test_value_only_positions_still_train_the_value():
    games = flagged_games(0, "random")
    for g in games:
        g.policy_recorded = np.zeros(g.num_positions, bool)
        g.outcome = 1
    first = losses(games, steps=1)[0]
    assert first["policy_loss"] == 0.0 and first["target_entropy"] == 0.0
    assert first["value_loss"] > 0.0


def test_the_policy_loss_is_the_mean_over_positions_with_a_target():
    learner = make_learner()
    learner.add(flagged_games(1, "random"))
    rng = copy.deepcopy(learner.rng)
    obs, pi, _ = learner.replay.sample(learner.config.batch_size, rng, augment=False)
    has = pi.sum(axis=1) > 0
    assert 0 < has.sum() < has.size
    learner.net.train()
    with torch.no_grad():
        logits, _ = learner.net(torch.from_numpy(obs).float())
    log_p = torch.log_softmax(logits, dim=1).numpy()
    expected = -(pi * log_p).sum(axis=1)[has].mean()
    assert learner.step()["policy_loss"] == pytest.approx(expected, rel=1e-5)


def test_without_fast_positions_only_fully_searched_positions_enter_the_window():
    """``train_fast_positions=False`` (KataGo's cap): the window holds exactly the recorded
    positions, in order, with their policies and values; only they count as inserted."""
    games = flagged_games(2, "random")
    config = dataclasses.replace(make_learner().config, train_fast_positions=False)
    learner = Learner(config, "tictactoe", NetConfig.preset("tiny"))
    learner.add(games)
    kept = [(g.obs[g.policy_mask], g.policy[g.policy_mask], g.value_targets()[g.policy_mask])
            for g in games]
    obs = np.concatenate([k[0] for k in kept])
    assert 0 < obs.shape[0] < sum(g.num_positions for g in games)
    assert learner.replay.inserted == len(learner.replay) == obs.shape[0]
    n = obs.shape[0]
    np.testing.assert_array_equal(learner.replay.obs[:n], obs)
    np.testing.assert_array_equal(learner.replay.policy[:n], np.concatenate([k[1] for k in kept]))
    np.testing.assert_array_equal(learner.replay.value[:n], np.concatenate([k[2] for k in kept]))
    assert (learner.replay.policy[:n].sum(axis=1) > 0.99).all()  # every row a real target
    # the default keeps them all, as value-only rows
    default = make_learner()
    default.add(games)
    assert default.replay.inserted == sum(g.num_positions for g in games)


@pytest.mark.parametrize("full_search_prob", [1.0, 0.3])
def test_the_service_counts_policy_targets_beside_positions(tmp_path, full_search_prob):
    """selfplay_policy_targets_total: every position without the cap, only the full
    searches with it (counted from the samples the worker recorded)."""
    from zeroforge.actors.selfplay_service import SelfPlayService
    from zeroforge.shared.metrics import merge, total
    from zeroforge.shared.nets import build_net
    from zeroforge.shared.run_context import RunContext
    from zeroforge.shared.transport import MemoryTransport

    transport = MemoryTransport("cap-metric")
    store = transport.weights()
    net_config = NetConfig.preset("tiny")
    torch.manual_seed(0)
    store.publish(build_net(net_config, make_game("tictactoe").spec), 0)
    ctx = RunContext(run_id="cap-metric", run_dir=str(tmp_path / "run"),
                     transport="memory://", game="tictactoe")
    search = SearchConfig(num_simulations=8, fast_simulations=2,
                          full_search_prob=full_search_prob)
    service = SelfPlayService(ctx, net_config, search, SelfPlayConfig(games_in_parallel=8),
                              transport.samples(), store, worker_id="w0", seed=3)
    service.run_once(12)
    merged = merge([service.recorder.snapshot()])
    kind = {"worker_kind": "selfplay"}
    positions = total(merged, "selfplay_positions_total", **kind)
    targets = total(merged, "selfplay_policy_targets_total", **kind)
    stats = service.worker.stats
    assert positions == stats.positions == 96 and targets == stats.policy_targets
    if full_search_prob == 1.0:
        assert targets == positions
    else:
        assert 0 < targets < positions and targets % 8 == 0  # a move is full for all games
