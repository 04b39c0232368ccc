"""Decoding within limits (``shared.samples.EntryLimits``): a hostile stream entry is
refused by reason before it becomes Python objects, so it costs the learner no more memory
than its own bytes, and every game a run can legally play still decodes."""

from __future__ import annotations

import dataclasses
import struct
import tracemalloc

import msgpack
import numpy as np
import pytest

from tests.contract.test_games_contract import SPECS
from tests.unit.memory_learner import memory_learner
from tests.unit.test_sample_fuzz import real_games
from zeroforge.shared.games import make_game
from zeroforge.shared.samples import (
    ENTRY_LIMITS_MARGIN,
    MAX_ENTRY_BYTES,
    EntryLimits,
    GameSamples,
    SampleFormatError,
    decode,
    encode,
)
from zeroforge.shared.transport import MemoryTransport

MB = 1024 * 1024


def nested_array_bomb(size: int = MAX_ENTRY_BYTES) -> bytes:
    """A ``size``-byte entry whose ``obs`` is one array of empty arrays: a plain msgpack
    decode builds a Python list per byte (about 1 GiB of objects for 16 MiB)."""
    head = msgpack.packb({"schema": 1, "game": "tictactoe"})
    count = size - len(head) - 4 - 5  # the key "obs" and the array32 header
    return (bytes([0x80 | 3]) + head[1:] + b"\xa3obs" + b"\xdd" + struct.pack(">I", count)
            + b"\x90" * count)


def deep_entry(depth: int = 10_000) -> bytes:
    """A map whose ``obs`` is ``depth`` arrays nested one in the other."""
    return b"\x81\xa3obs" + b"\x91" * depth + b"\x90"


def test_the_bombs_are_what_they_claim():
    """Without limits msgpack takes both (the first as millions of lists: checked on a
    small one), so the refusals below come from the limits."""
    small = msgpack.unpackb(nested_array_bomb(100_000), raw=False)
    assert len(small["obs"]) > 99_000 and small["obs"][0] == []
    assert len(nested_array_bomb()) == MAX_ENTRY_BYTES
    with pytest.raises(msgpack.StackError):  # msgpack's own depth limit
        msgpack.unpackb(deep_entry())


@pytest.mark.parametrize("limits", [None, EntryLimits.for_games([make_game("go19").spec])])
def test_a_nested_array_bomb_is_refused_at_its_header_in_bounded_memory(limits):
    """As large as the limits let an entry be: 16 MiB by default, a 19x19 run's ~1 MiB."""
    data = nested_array_bomb(limits.max_bytes if limits else MAX_ENTRY_BYTES)
    tracemalloc.start()
    try:
        with pytest.raises(SampleFormatError) as err:
            decode(data, limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.reason == "over_limits", err.value
    assert "max_array_len" in str(err.value)
    assert peak < 100 * MB, f"decoding took {peak / MB:.0f} MB"


def test_a_deeply_nested_entry_is_refused_as_too_deep():
    with pytest.raises(SampleFormatError) as err:
        decode(deep_entry())
    assert err.value.reason == "too_deep"


def longest_game(spec_string: str, seed: int = 0) -> GameSamples:
    """A game of the most positions ``spec_string`` allows (noise for planes and policies:
    the decoder checks form, not meaning), with every optional field the game can carry."""
    spec = make_game(spec_string).spec
    rng = np.random.default_rng(seed)
    t = spec.max_moves
    policy = rng.random((t, spec.num_actions)).astype(np.float32)
    go = spec.name == "go"
    return GameSamples(
        game=spec.spec_string, game_version=spec.version,
        obs=rng.integers(0, 2, (t, *spec.obs_shape)).astype(np.uint8),
        policy=policy / policy.sum(axis=1, keepdims=True),
        to_play=(np.arange(t) % 2).astype(np.int8), outcome=1,
        run_id="r" * 64, worker_id="w" * 64, game_id="g" * 128,
        ownership=rng.integers(-1, 2, spec.board_shape).astype(np.int8) if go else None,
        score=3.5 if go else None)


@pytest.mark.parametrize("spec", [*SPECS, "go19"])
def test_the_longest_legal_game_of_each_game_decodes_within_its_limits(spec):
    game = longest_game(spec)
    limits = EntryLimits.for_games([make_game(spec).spec])
    blob = encode(game)
    assert len(blob) <= limits.max_bytes
    back = decode(blob, limits)
    assert back.num_positions == game.num_positions and back.has_aux == game.has_aux
    # a game longer than the rules allow still decodes (the learner's ``too_long`` says
    # what is wrong with it); one past the margin is refused at its byte strings
    for extra, refused in ((1, False), (ENTRY_LIMITS_MARGIN * game.num_positions, True)):
        idx = np.arange(game.num_positions + extra) % game.num_positions
        longer = dataclasses.replace(game, obs=game.obs[idx], policy=game.policy[idx],
                                     to_play=(np.arange(idx.size) % 2).astype(np.int8))
        if not refused:
            assert decode(encode(longer), limits).num_positions == idx.size
            continue
        with pytest.raises(SampleFormatError) as err:
            decode(encode(longer), limits)
        assert err.value.reason in ("over_limits", "oversized")


def test_a_run_of_several_sizes_takes_the_largest():
    small, large = make_game("go:size=9").spec, make_game("go:size=13").spec
    both = EntryLimits.for_games([small, large])
    assert both == EntryLimits.for_games([large]) != EntryLimits.for_games([small])
    decode(encode(longest_game("go:size=13")), both)
    with pytest.raises(ValueError):
        EntryLimits.for_games([])


def test_the_learner_acks_hostile_entries_by_reason_and_trains_on(tmp_path):
    """A learner (its stream in memory) meets the bombs (16 MiB, and as large as a
    tic-tac-toe run's limits allow), a Go game in a tic-tac-toe run and real games: the bad
    ones are rejected by reason and acknowledged, the good ones received, and decoding
    stayed within its bounds."""
    transport = MemoryTransport("bombs")
    service = memory_learner(tmp_path, transport)
    good = real_games(3)
    run_sized = EntryLimits.for_games([make_game("tictactoe").spec]).max_bytes
    transport.samples().append_raw([nested_array_bomb(), encode(good[0]), deep_entry(),
                                    nested_array_bomb(run_sized), encode(good[1]),
                                    encode(longest_game("go9")), encode(good[2])])
    tracemalloc.start()
    try:
        service.run_once(max_read=64, block_ms=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * MB, f"the turn took {peak / MB:.0f} MB"
    assert dict(service.rejected) == {"over_limits": 2, "too_deep": 1, "oversized": 1}
    assert service.games_received == 3
    assert transport.samples().info().lag == 0  # all seven taken, none left pending
    service.close()
