"""Fuzzing the learner's intake: thousands of malformed stream entries (random bytes, random
msgpack, and schema-valid games made wrong by mutating real ones) mixed with real games,
read by a real ``LearnerService`` over the in-memory transport. Nothing malformed may reach
the replay window, every bad entry is counted under a known reason, every good game lands."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import msgpack
import numpy as np
import pytest

from tests.unit.memory_learner import memory_learner
from zeroforge.actors.config import SelfPlayConfig
from zeroforge.actors.selfplay import SelfPlayWorker
from zeroforge.learner.sample_checks import REASONS
from zeroforge.shared.games import make_game
from zeroforge.shared.samples import GameSamples, SampleFormatError, decode, encode
from zeroforge.shared.search import SearchConfig, UniformEvaluator
from zeroforge.shared.transport import MemoryTransport

GAME = "tictactoe"
DECODE_REASONS = {"not_msgpack", "not_a_map", "unknown_schema", "missing_field", "bad_field",
                  "bad_shape", "bad_outcome", "bad_length", "oversized", "bad_policy",
                  "bad_to_play", "no_data", "too_deep", "over_limits"}
KNOWN = DECODE_REASONS | set(REASONS) | {"wrong_game"}
Rng = np.random.Generator


def real_games(n: int) -> list[GameSamples]:
    worker = SelfPlayWorker(make_game(GAME), UniformEvaluator(), SearchConfig(num_simulations=8),
                            SelfPlayConfig(games_in_parallel=32), seed=11, worker_id="w")
    return worker.play_games(n)[:n]


def _copy(g: GameSamples, **fields) -> GameSamples:
    arrays = {"obs": g.obs.copy(), "policy": g.policy.copy(), "to_play": g.to_play.copy()}
    arrays.update(fields)
    return dataclasses.replace(g, **arrays)


# --- mutations: each turns a real game into one that is certainly wrong ------------------
def scale_policy(g: GameSamples, rng: Rng) -> GameSamples:
    p = g.policy.copy()
    t = rng.integers(g.num_positions)
    p[t] *= rng.uniform(1.05, 100) if rng.random() < 0.5 else rng.uniform(0, 0.95)
    return _copy(g, policy=p)


def zero_policy(g: GameSamples, rng: Rng) -> GameSamples:
    p = g.policy.copy()
    p[rng.integers(g.num_positions)] = 0
    return _copy(g, policy=p)


def nan_policy(g: GameSamples, rng: Rng) -> GameSamples:
    p = g.policy.copy()
    p[rng.integers(g.num_positions), rng.integers(p.shape[1])] = np.nan
    return _copy(g, policy=p)


def mass_on_occupied(g: GameSamples, rng: Rng) -> GameSamples:
    p = g.policy.copy()
    t = int(rng.integers(1, g.num_positions))  # position 0 has no stone
    occupied = np.flatnonzero((g.obs[t, 0] | g.obs[t, 1]).reshape(-1))
    share = rng.uniform(0.01, 1.0)
    p[t] *= 1 - share
    p[t, rng.choice(occupied)] += share
    return _copy(g, policy=p)


def other_outcome(g: GameSamples, rng: Rng) -> GameSamples:
    return dataclasses.replace(g, outcome=int(rng.choice(sorted({-1, 0, 1} - {g.outcome}))))


def huge_length(g: GameSamples, rng: Rng) -> GameSamples:
    t = int(rng.choice([10, 50, 200, 20_000], p=[0.4, 0.4, 0.19, 0.01]))
    idx = np.arange(t) % g.num_positions
    return _copy(g, obs=g.obs[idx], policy=g.policy[idx], to_play=(np.arange(t) % 2).astype(
        np.int8))


def swap_obs(g: GameSamples, rng: Rng) -> GameSamples:
    i, j = rng.choice(g.num_positions, 2, replace=False)
    obs = g.obs.copy()
    obs[[i, j]] = obs[[j, i]]
    return _copy(g, obs=obs)


def flip_stone_bit(g: GameSamples, rng: Rng) -> GameSamples:
    obs = g.obs.copy()
    t, plane = rng.integers(g.num_positions), rng.integers(2)
    r, c = rng.integers(3), rng.integers(3)
    obs[t, plane, r, c] ^= 1
    return _copy(g, obs=obs)


def flip_mover(g: GameSamples, rng: Rng) -> GameSamples:
    to_play = g.to_play.copy()
    to_play[rng.integers(g.num_positions)] ^= 1
    return _copy(g, to_play=to_play)


def cut_odd(g: GameSamples, rng: Rng) -> GameSamples:
    """Drop an odd number of final positions: the last mover changes, and in tic-tac-toe
    the last mover cannot lose, nor draw with two empty points left."""
    cut = g.num_positions - int(rng.choice(np.arange(1, g.num_positions, 2)))
    return _copy(g, obs=g.obs[:cut], policy=g.policy[:cut], to_play=g.to_play[:cut])


def territory_claimed(g: GameSamples, rng: Rng) -> GameSamples:
    """Ownership and score targets (schema 3) on a game without territory."""
    ownership = rng.integers(-1, 2, g.obs.shape[2:]).astype(np.int8)
    return dataclasses.replace(g, ownership=ownership, score=float(ownership.sum()))


def foreign_game(g: GameSamples, rng: Rng) -> GameSamples:
    return dataclasses.replace(g, game="gomoku:size=3,k=3")


MUTATIONS: list[Callable[[GameSamples, Rng], GameSamples]] = [
    scale_policy, zero_policy, nan_policy, mass_on_occupied, other_outcome, huge_length,
    swap_obs, flip_stone_bit, flip_mover, cut_odd, territory_claimed, foreign_game]


def random_value(rng: Rng, depth: int = 0):
    kind = rng.integers(7 if depth < 2 else 5)
    if kind == 0:
        return int(rng.integers(-2**40, 2**40))
    if kind == 1:
        return float(rng.normal())
    if kind == 2:
        return "".join(chr(int(c)) for c in rng.integers(32, 0x2FF, rng.integers(0, 12)))
    if kind == 3:
        return rng.bytes(int(rng.integers(0, 64)))
    if kind == 4:
        return [None, True, False][rng.integers(3)]
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.integers(0, 5))]
    return {str(random_value(rng, 2)): random_value(rng, depth + 1)
            for _ in range(rng.integers(0, 5))}


def broken_fields(g: GameSamples, rng: Rng) -> bytes:
    """A real entry with one field dropped or given a value of another type."""
    fields = msgpack.unpackb(encode(g), raw=False)
    name = str(rng.choice(sorted(fields)))
    if rng.random() < 0.3:
        del fields[name]
    else:
        value = random_value(rng)
        while type(value) is type(fields[name]):
            value = random_value(rng)
        fields[name] = value
    return msgpack.packb(fields, use_bin_type=True)


def bad_entries(games: list[GameSamples], n: int, rng: Rng) -> list[bytes | None]:
    out: list[bytes | None] = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.15:
            out.append(rng.bytes(int(rng.integers(0, 300))))
        elif kind < 0.3:
            out.append(msgpack.packb(random_value(rng), use_bin_type=True))
        elif kind < 0.4:
            out.append(broken_fields(games[rng.integers(len(games))], rng))
        elif kind < 0.41:
            out.append(None)
        else:
            base = games[rng.integers(len(games))]
            mutate = MUTATIONS[rng.integers(len(MUTATIONS))]
            out.append(encode(dataclasses.replace(mutate(base, rng), game_id=f"bad-{i}")))
    return out


@pytest.mark.parametrize("seed", [0])
def test_nothing_malformed_reaches_the_replay_window(tmp_path, seed):
    rng = np.random.default_rng(seed)
    good = real_games(60)
    bad = bad_entries(good, 3000, rng)
    entries: list[bytes | None] = list(bad)
    for g in good:  # the real games, spread through the poison
        entries.insert(int(rng.integers(len(entries) + 1)), encode(g))

    transport = MemoryTransport("fuzz")
    service = memory_learner(tmp_path, transport, max_backlog=100_000, batch_size=16,
                             min_replay=10**9, replay_capacity=100_000)
    transport.samples().append_raw(entries)
    while service.run_once(max_read=500, block_ms=0)["read"]:
        pass
    service.run_once(max_read=500, block_ms=0)

    positions = sum(g.num_positions for g in good)
    assert service.games_received == len(good)
    assert service.positions_received == positions
    assert service.learner.replay.inserted == positions
    assert sorted(service.recent_game_ids) == sorted(g.game_id for g in good)
    assert set(service.rejected) <= KNOWN, set(service.rejected) - KNOWN
    assert sum(service.rejected.values()) == len(bad)
    assert transport.samples().info().lag == 0
    # the semantic checks did real work: each of their reasons fired (a 20,000-position
    # game is refused earlier, at its size: ``EntryLimits``)
    assert set(REASONS) <= set(service.rejected), service.rejected
    assert service.rejected["over_limits"] > 0, service.rejected
    service.close()


@pytest.mark.parametrize("schema", [True, 1.0])
def test_a_schema_that_only_equals_the_version_is_unknown(schema):
    fields = msgpack.unpackb(encode(real_games(1)[0]), raw=False)
    with pytest.raises(SampleFormatError, match="unknown_schema"):
        decode(msgpack.packb({**fields, "schema": schema}, use_bin_type=True))
