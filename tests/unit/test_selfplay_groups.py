"""Leaf batches in flight (``actors.selfplay_groups``): a worker's games searched in groups
from their own threads play exactly the games of the one-group worker."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.actors.selfplay_groups import InFlightWorker, group_slots
from zeroforge.shared.games import make_game
from zeroforge.shared.search import Evaluation, SearchConfig


class ProjectionEvaluator:
    """Deterministic per position: priors and value from a fixed random projection of the
    observation, so the search depends on both. Each call sleeps a little (releasing the
    GIL, as a remote call's wait does), so the groups' threads really interleave; it
    records the largest number of calls that were in progress at once."""

    def __init__(self, game, seed: int = 0, sleep_s: float = 0.0005) -> None:
        rng = np.random.default_rng(seed)
        size = int(np.prod(game.spec.obs_shape))
        self.policy = rng.normal(size=(size, game.spec.num_actions)).astype(np.float32)
        self.value = rng.normal(size=size).astype(np.float32) / np.sqrt(size)
        self.sleep_s = sleep_s
        self._lock = threading.Lock()
        self._in_progress = 0
        self.most_at_once = 0

    def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
        with self._lock:
            self._in_progress += 1
            self.most_at_once = max(self.most_at_once, self._in_progress)
        try:
            time.sleep(self.sleep_s)
            # Row by row: a matrix product's rounding may depend on the batch's size,
            # and a group's batches are smaller than the whole worker's.
            flat = obs.reshape(obs.shape[0], -1).astype(np.float32)
            logits = np.stack([row @ self.policy for row in flat])
            value = np.array([np.tanh(row @ self.value) for row in flat], np.float32)
            return Evaluation(logits, value)
        finally:
            with self._lock:
                self._in_progress -= 1


def play(spec: str, search: SearchConfig, groups: int, moves: int, batch: int = 6,
         seed: int = 11) -> tuple[list, InFlightWorker | SelfPlayWorker, ProjectionEvaluator]:
    game = make_game(spec)
    evaluator = ProjectionEvaluator(game)
    config = SelfPlayConfig(games_in_parallel=batch, batches_in_flight=groups)
    worker: InFlightWorker | SelfPlayWorker
    if groups == 1:
        worker = SelfPlayWorker(game, evaluator, search, config, seed=seed)
    else:
        worker = InFlightWorker(batch, groups, lambda slots, ids: SelfPlayWorker(
            game, evaluator, search, config, seed=seed, slots=slots, game_ids=ids))
    games = []
    for _ in range(moves):
        games.extend(worker.play_moves(1))
    return games, worker, evaluator


def content(games: list) -> list[tuple]:
    """The games as comparable content (ids differ with the order groups finish in)."""
    return sorted((g.obs.tobytes(), g.policy.tobytes(), g.to_play.tobytes(), g.outcome,
                   None if g.policy_recorded is None else g.policy_recorded.tobytes())
                  for g in games)


SEARCHES = {
    "puct, noise, reuse, playout cap": SearchConfig(
        num_simulations=12, reuse_tree=True, full_search_prob=0.5, fast_simulations=4,
        forced_playouts_k=2.0, temperature_moves=4),
    "gumbel": SearchConfig(num_simulations=8, gumbel=True, gumbel_max_considered=4),
    "leaf batches with virtual loss": SearchConfig(num_simulations=12, leaf_batch=4),
}


@pytest.mark.parametrize("name", list(SEARCHES))
@pytest.mark.parametrize("groups", [2, 3])
def test_groups_play_the_same_games_with_the_same_results_as_one(name: str, groups: int) -> None:
    search = SEARCHES[name]
    one, _, _ = play("gomoku:size=6,k=4", search, 1, moves=40)
    many, worker, evaluator = play("gomoku:size=6,k=4", search, groups, moves=40)
    assert len(one) >= 6, "too few games finished to compare"
    assert content(many) == content(one)
    assert evaluator.most_at_once >= 2, "the groups never had two requests out at once"
    assert worker.stats.games == len(many)
    assert worker.stats.positions == 40 * 6
    assert len({g.game_id for g in many}) == len(many)  # ids unique across the groups


def test_the_same_games_come_whatever_the_calls_moves_per_call() -> None:
    """The service plays one move a call; a caller may ask for several."""
    search = SEARCHES["puct, noise, reuse, playout cap"]
    one, _, _ = play("tictactoe", search, 1, moves=24)
    game = make_game("tictactoe")
    config = SelfPlayConfig(games_in_parallel=6, batches_in_flight=2)
    worker = InFlightWorker(6, 2, lambda slots, ids: SelfPlayWorker(
        game, ProjectionEvaluator(game), search, config, seed=11, slots=slots, game_ids=ids))
    many = worker.play_moves(10) + worker.play_moves(14)
    assert content(many) == content(one)


def test_games_finished_beside_a_failing_group_are_kept_for_the_next_call() -> None:
    game = make_game("tictactoe")
    search = SearchConfig(num_simulations=4)
    config = SelfPlayConfig(games_in_parallel=4, batches_in_flight=2)
    failing = {"on": False}

    class Flaky(ProjectionEvaluator):
        def evaluate(self, obs: np.ndarray, legal: np.ndarray) -> Evaluation:
            if failing["on"]:
                raise RuntimeError("server gone")
            return super().evaluate(obs, legal)

    def group(slots: range, ids) -> SelfPlayWorker:
        # the first group's evaluator fails when told to, the second's never
        evaluator = Flaky(game) if slots.start == 0 else ProjectionEvaluator(game)
        return SelfPlayWorker(game, evaluator, search, config, seed=1, slots=slots,
                              game_ids=ids)

    worker = InFlightWorker(4, 2, group)
    done = worker.play_moves(8)  # every tic-tac-toe game lasts 5 to 9 moves
    failing["on"] = True
    with pytest.raises(RuntimeError, match="server gone"):
        worker.play_moves(1)  # one group fails; the other plays its 9th move
    failing["on"] = False
    done += worker.play_moves(1)
    ended = {g.game_id for g in done}
    assert len(ended) == len(done) == worker.stats.games
    assert worker.stats.games >= 4  # all four first games finished by their 9th move


def test_group_slots_split_evenly_and_refuse_impossible_counts() -> None:
    assert group_slots(7, 3) == [range(0, 3), range(3, 5), range(5, 7)]
    assert group_slots(4, 1) == [range(0, 4)]
    with pytest.raises(ValueError, match="between 1 and games_in_parallel"):
        group_slots(4, 5)
    with pytest.raises(ValueError, match="batches_in_flight must be between 1"):
        SelfPlayConfig(games_in_parallel=4, batches_in_flight=0)
    with pytest.raises(ValueError, match="batches_in_flight must be between 1"):
        SelfPlayConfig(games_in_parallel=4, batches_in_flight=5)


def test_the_service_groups_a_worker_behind_servers_and_not_one_with_its_own_net(
        tmp_path) -> None:
    import torch

    from zeroforge.actors.selfplay_service import SelfPlayService
    from zeroforge.shared.metrics import merge, total
    from zeroforge.shared.nets import NetConfig, build_net
    from zeroforge.shared.run_context import RunContext
    from zeroforge.shared.transport import MemoryTransport

    game = make_game("tictactoe")
    transport = MemoryTransport("groups")
    store = transport.weights()
    net = NetConfig.preset("tiny")
    torch.manual_seed(0)
    store.publish(build_net(net, game.spec), 0)
    ctx = RunContext(run_id="groups", run_dir=str(tmp_path / "run"), transport="memory://",
                     game="tictactoe")
    config = SelfPlayConfig(games_in_parallel=8, batches_in_flight=2, eval_cache_entries=100)
    search = SearchConfig(num_simulations=8)

    class Served(ProjectionEvaluator):  # stands for a RemoteEvaluator: it has a version
        weights_version = 0

    served = SelfPlayService(ctx, net, search, config, transport.samples(), store,
                             worker_id="w0", seed=3, evaluator=Served(game))
    assert isinstance(served.worker, InFlightWorker) and len(served.worker.groups) == 2
    assert [c.cache.capacity for c in served.caches] == [50, 50]  # a cache a group, split
    assert served.run_once(12) == len(served.appended_ids) > 0
    kind = {"worker_kind": "selfplay"}
    assert total(merge([served.recorder.snapshot()]), "selfplay_positions_total",
                 **kind) == 96
    assert len(set(served.appended_ids)) == len(served.appended_ids)
    own = SelfPlayService(ctx, net, search, config, transport.samples(), store,
                          worker_id="w1", seed=3)
    assert isinstance(own.worker, SelfPlayWorker)  # its evaluation is its own core's work
