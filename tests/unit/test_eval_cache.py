"""The evaluation cache: dedup within a batch, hits across calls, LRU bound, invalidation on
new weights, exact outputs; with toy evaluators that count what reaches them, a real net,
real self-play and the inference server."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from zeroforge.shared.games import make_game
from zeroforge.shared.search import (
    CachedEvaluator,
    EvalCache,
    Evaluation,
    EvaluationError,
    position_keys,
)

A = 5


class CountingEvaluator:
    """Row-wise deterministic: logits and value are functions of the row's bytes, shifted
    by the weights version; counts the rows and calls it is asked for."""

    def __init__(self, version: int = 0, expose_version: bool = True) -> None:
        self.calls = 0
        self.rows = 0
        self.batches: list[int] = []
        self._version = version
        self.expose_version = expose_version

    def __getattr__(self, name: str):
        if name == "weights_version" and self.__dict__.get("expose_version"):
            return self._version
        raise AttributeError(name)

    def set_version(self, version: int) -> None:
        self._version = version

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        self.calls += 1
        self.rows += obs.shape[0]
        self.batches.append(obs.shape[0])
        flat = obs.reshape(obs.shape[0], int(np.prod(obs.shape[1:]))).astype(np.float32)
        weights = np.arange(1, flat.shape[1] + 1, dtype=np.float32)
        base = flat @ weights + 1000.0 * self._version
        logits = base[:, None] + np.arange(A, dtype=np.float32)[None, :]
        value = np.tanh(base / 100.0).astype(np.float32)
        return Evaluation(logits.astype(np.float32), value, self._version)


def _batch(ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Observations [B, 2, 3, 3] uint8 determined by ids, all-legal masks."""
    obs = np.zeros((len(ids), 2, 3, 3), np.uint8)
    for i, k in enumerate(ids):
        obs[i].reshape(-1)[:] = [(k >> bit) & 1 for bit in range(18)]
    return obs, np.ones((len(ids), A), bool)


def test_duplicates_in_one_batch_are_evaluated_once():
    inner = CountingEvaluator()
    cached = CachedEvaluator(inner, capacity=100)
    obs, legal = _batch([1, 2, 1, 3, 2, 1])
    ev = cached.evaluate(obs, legal)
    assert inner.batches == [3]
    ref = CountingEvaluator().evaluate(obs, legal)
    np.testing.assert_array_equal(ev.policy_logits, ref.policy_logits)
    np.testing.assert_array_equal(ev.value, ref.value)
    assert (cached.stats.lookups, cached.stats.hits, cached.stats.evaluated) == (6, 3, 3)


def test_repeats_across_calls_hit_and_only_new_rows_are_evaluated():
    inner = CountingEvaluator()
    cached = CachedEvaluator(inner, capacity=100)
    cached.evaluate(*_batch([1, 2, 3]))
    ev = cached.evaluate(*_batch([3, 4, 1]))
    assert inner.batches == [3, 1]
    ref = CountingEvaluator().evaluate(*_batch([3, 4, 1]))
    np.testing.assert_array_equal(ev.policy_logits, ref.policy_logits)
    np.testing.assert_array_equal(ev.value, ref.value)
    cached.evaluate(*_batch([1, 2, 3, 4]))
    assert inner.calls == 2  # everything known: no call at all
    assert cached.stats.hit_ratio == pytest.approx(6 / 10)


def test_lru_bound_holds_and_evicts_the_least_recently_used():
    inner = CountingEvaluator()
    cached = CachedEvaluator(inner, capacity=3)
    cached.evaluate(*_batch([1, 2, 3]))
    cached.evaluate(*_batch([1]))           # 1 is now the most recent; 2 the oldest
    cached.evaluate(*_batch([4]))           # evicts 2
    assert len(cached.cache) == 3
    inner.rows = 0
    cached.evaluate(*_batch([1, 3, 4]))
    assert inner.rows == 0
    cached.evaluate(*_batch([2]))
    assert inner.rows == 1
    for k in range(10, 40):
        cached.evaluate(*_batch([k, k + 100]))
        assert len(cached.cache) <= 3


def test_a_batch_larger_than_the_cache_is_still_answered_exactly():
    inner = CountingEvaluator()
    cached = CachedEvaluator(inner, capacity=2)
    ids = list(range(7)) + [3, 5]
    ev = cached.evaluate(*_batch(ids))
    ref = CountingEvaluator().evaluate(*_batch(ids))
    np.testing.assert_array_equal(ev.policy_logits, ref.policy_logits)
    assert inner.batches == [7] and len(cached.cache) == 2


def test_new_weights_known_before_the_call_empty_the_cache():
    inner = CountingEvaluator(version=1)
    cached = CachedEvaluator(inner, capacity=100)
    cached.evaluate(*_batch([1, 2]))
    inner.set_version(2)
    ev = cached.evaluate(*_batch([1, 2]))
    assert inner.batches == [2, 2]
    assert ev.weights_version == 2 and cached.stats.invalidations == 1
    ref = CountingEvaluator(version=2).evaluate(*_batch([1, 2]))
    np.testing.assert_array_equal(ev.policy_logits, ref.policy_logits)


def test_new_weights_seen_only_in_an_answer_never_mix_versions_in_one_batch():
    """A remote evaluator's server moves on by itself: the worker learns it from an answer.
    Rows the table answered with the old weights are evaluated again."""
    inner = CountingEvaluator(version=1, expose_version=False)
    cached = CachedEvaluator(inner, capacity=100)
    cached.evaluate(*_batch([1, 2]))
    assert cached.weights_version == 1
    inner.set_version(2)
    ev = cached.evaluate(*_batch([1, 2, 9]))  # 1, 2 hit with v1; 9 comes back as v2
    ref = CountingEvaluator(version=2).evaluate(*_batch([1, 2, 9]))
    assert ev.weights_version == 2
    np.testing.assert_array_equal(ev.policy_logits, ref.policy_logits)
    np.testing.assert_array_equal(ev.value, ref.value)
    assert inner.batches == [2, 1, 3]
    assert cached.stats.hits == 0 and cached.stats.invalidations == 1
    inner.rows = 0
    cached.evaluate(*_batch([1, 2, 9]))
    assert inner.rows == 0


def test_the_key_covers_every_bit_of_the_observation_and_the_legal_mask():
    obs, legal = _batch([5, 5])
    legal[1, 0] = False
    a, b = position_keys(obs, legal)
    assert a != b
    (e,) = position_keys(obs[:1].copy(), legal[:1].copy())
    assert e == a
    keys = set()
    for bit in range(obs[0].size):  # each plane bit on its own changes the key
        flipped = obs[:1].copy()
        flipped.reshape(-1)[bit] ^= 1
        keys.update(position_keys(flipped, legal[:1]))
    assert len(keys) == obs[0].size and a not in keys


def test_non_binary_observations_are_keyed_by_a_digest_of_dtype_shape_and_bytes():
    obs, legal = _batch([5])
    wide = obs.astype(np.float32) * 0.5
    (f,) = position_keys(wide, legal)
    (g,) = position_keys(wide.reshape(1, 2, 9, 1), legal)
    (h,) = position_keys(wide.astype(np.float64), legal)
    (u,) = position_keys(obs, legal)
    assert len({f, g, h, u}) == 4
    assert position_keys(wide.copy(), legal.copy()) == [f]
    twos = obs * 2  # uint8 but not 0/1: digested
    assert position_keys(twos, legal) != position_keys(obs, legal)


def test_bad_inner_output_is_reported_and_not_stored():
    class Broken:
        def evaluate(self, obs, legal):
            return Evaluation(np.zeros((obs.shape[0], A + 1), np.float32),
                              np.zeros(obs.shape[0], np.float32))

    cached = CachedEvaluator(Broken(), capacity=10)
    with pytest.raises(EvaluationError, match="policy_logits of shape"):
        cached.evaluate(*_batch([1]))
    assert len(cached.cache) == 0


def test_an_empty_batch_passes_through():
    cached = CachedEvaluator(CountingEvaluator(), capacity=10)
    ev = cached.evaluate(np.zeros((0, 2, 3, 3), np.uint8), np.zeros((0, A), bool))
    assert ev.policy_logits.shape == (0, A) and ev.value.shape == (0,)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        EvalCache(0)


@pytest.mark.parametrize("spec", ["gomoku6", "go9"])
def test_real_net_outputs_are_the_nets_own_and_a_weights_swap_invalidates(spec):
    """With a real network: each answered row is what the net says for that position (up
    to float reassociation across batch sizes), and loading weights empties the cache."""
    import torch

    from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net

    torch.manual_seed(0)
    game = make_game(spec)
    net = build_net(NetConfig.preset("small"), game.spec)
    ev = TorchEvaluator(net, device="cpu")
    cached = CachedEvaluator(ev, capacity=10_000)
    state = game.init(4)
    rng = np.random.default_rng(0)
    for _ in range(3):
        legal = game.legal_mask(state)
        actions = np.array([rng.choice(np.flatnonzero(row)) for row in legal])
        state = game.step(state, actions)
    obs, legal = game.observe(state), game.legal_mask(state)
    obs2 = np.concatenate([obs, obs[:2]])
    legal2 = np.concatenate([legal, legal[:2]])
    got = cached.evaluate(obs2, legal2)
    want = ev.evaluate(obs2, legal2)
    np.testing.assert_allclose(got.policy_logits, want.policy_logits, rtol=0, atol=1e-5)
    np.testing.assert_allclose(got.value, want.value, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got.policy_logits[4:], got.policy_logits[:2])
    assert cached.stats.evaluated == 4
    # Same rows again: from the table, bit for bit the first answer.
    again = cached.evaluate(obs2, legal2)
    np.testing.assert_array_equal(again.policy_logits, got.policy_logits)
    assert cached.stats.evaluated == 4
    state_dict = {k: v + 0.01 if v.is_floating_point() else v
                  for k, v in ev.state_dict().items()}
    ev.load_state_dict(state_dict, version=7)
    after = cached.evaluate(obs2, legal2)
    assert after.weights_version == 7 and cached.stats.evaluated == 8
    np.testing.assert_allclose(after.policy_logits, ev.evaluate(obs2, legal2).policy_logits,
                               rtol=0, atol=1e-5)


def test_selfplay_with_the_cache_plays_the_same_games_as_without():
    """A row-wise exact evaluator makes cached and uncached self-play identical move for
    move, while the cache answers a good share of the positions."""
    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay import SelfPlayWorker
    from zeroforge.shared.search import SearchConfig

    game = make_game("gomoku6")

    class BoardEvaluator(CountingEvaluator):
        def evaluate(self, obs, legal):
            inner = super().evaluate(obs, legal)
            # spread the logits over the real action count
            base = inner.policy_logits[:, :1] / 1e3
            logits = base + np.linspace(0, 1, legal.shape[1], dtype=np.float32)[None]
            return Evaluation(np.sin(logits * 7).astype(np.float32), inner.value * 0.1, 0)

    search = SearchConfig(num_simulations=24)
    config = SelfPlayConfig(games_in_parallel=8)
    plain = SelfPlayWorker(game, BoardEvaluator(), search, config, seed=3)
    cached = CachedEvaluator(BoardEvaluator(), capacity=50_000)
    worker = SelfPlayWorker(game, cached, search, config, seed=3)
    a = plain.play_moves(12)
    b = worker.play_moves(12)
    assert [g.game_id.split("-")[-1] for g in a] == [g.game_id.split("-")[-1] for g in b]
    for ga, gb in zip(a, b, strict=True):
        np.testing.assert_array_equal(ga.policy, gb.policy)
    np.testing.assert_array_equal(game.observe(plain.state), game.observe(worker.state))
    assert cached.stats.hit_ratio > 0.1
    assert cached.inner.rows == cached.stats.evaluated < cached.stats.lookups


def test_inference_server_cache_answers_repeats_and_counts_hits():
    from zeroforge.actors.config import InferenceServerConfig
    from zeroforge.actors.inference import InferenceServer
    from zeroforge.shared.metrics import merge, total
    from zeroforge.shared.nets import NetConfig

    game = make_game("gomoku6")
    server = InferenceServer("gomoku6", NetConfig.preset("small"),
                             InferenceServerConfig(device="cpu", cache_entries=1000,
                                                   max_wait_ms=0.0), None, "t")
    state = game.init(3)
    obs, legal = game.observe(state), game.legal_mask(state)

    async def run():
        try:
            first = await server.evaluate(obs, legal)
            second = await server.evaluate(obs, legal)
            return first, second
        finally:
            server.close()

    first, second = asyncio.run(run())
    np.testing.assert_array_equal(first[0], second[0])
    merged = merge([server.stats()])
    assert total(merged, "eval_cache_lookups_total", source="server") == 6
    assert total(merged, "eval_cache_hits_total", source="server") == 5
    assert total(merged, "nn_evaluations_total", source="server") == 1


def test_selfplay_service_counts_worker_cache_hits_and_empties_it_on_new_weights(tmp_path):
    """The worker side as a run builds it: its own network, weights from the run's
    (in-process) weight store, the cache in front of the network."""
    import torch

    from zeroforge.actors.config import SelfPlayConfig
    from zeroforge.actors.selfplay_service import SelfPlayService
    from zeroforge.shared.metrics import merge, total
    from zeroforge.shared.nets import NetConfig, build_net
    from zeroforge.shared.run_context import RunContext
    from zeroforge.shared.search import SearchConfig
    from zeroforge.shared.transport import MemoryTransport

    transport = MemoryTransport("cache-test")
    store = transport.weights()
    net_config = NetConfig.preset("tiny")
    spec = make_game("tictactoe").spec
    torch.manual_seed(0)
    store.publish(build_net(net_config, spec), 0)
    ctx = RunContext(run_id="cache-test", run_dir=str(tmp_path / "run"),
                     transport="memory://", game="tictactoe")
    service = SelfPlayService(ctx, net_config, SearchConfig(num_simulations=16),
                              SelfPlayConfig(games_in_parallel=8, eval_cache_entries=2000),
                              transport.samples(), store, worker_id="w0", seed=1)
    service.run_once(6)
    merged = merge([service.recorder.snapshot()])
    lookups = total(merged, "eval_cache_lookups_total", source="worker")
    hits = total(merged, "eval_cache_hits_total", source="worker")
    assert 0 < hits < lookups
    assert total(merged, "nn_evaluations_total", source="local") == lookups - hits
    assert service.cache is not None and service.cache.stats.invalidations == 0
    torch.manual_seed(1)
    store.publish(build_net(net_config, spec), 1)
    service.refresh_weights()
    service.run_once(1)
    assert service.cache.stats.invalidations == 1 and service.cache.cache.version == 1


def test_cache_sizes_must_not_be_negative():
    from zeroforge.actors.config import InferenceServerConfig, SelfPlayConfig

    with pytest.raises(ValueError, match="eval_cache_entries must be >= 0"):
        SelfPlayConfig(eval_cache_entries=-1)
    with pytest.raises(ValueError, match="cache_entries must be >= 0"):
        InferenceServerConfig(cache_entries=-1)
