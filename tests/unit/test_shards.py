"""Stream shards: ids, cursors, placement by game id, and a refusing shard's games going
to the next one (over the in-memory stream, one shard made to fail)."""

import numpy as np
import pytest

from zeroforge.shared.samples import GameSamples
from zeroforge.shared.transport import (
    MemoryTransport,
    PartialAckError,
    ShardedSampleStream,
    TransportError,
    WriterCounts,
    advance_cursor,
    parse_cursor,
    shard_of,
    split_id,
)


def game(game_id: str) -> GameSamples:
    policy = np.full((2, 9), 1 / 9, dtype=np.float32)
    return GameSamples(game="tictactoe", game_version=1, obs=np.zeros((2, 3, 3, 3), np.uint8),
                       policy=policy, to_play=np.array([0, 1], np.int8), outcome=0,
                       weights_version=0, run_id="r", worker_id="w0", game_id=game_id)


def test_ids_and_cursors():
    assert split_id("2/17-0") == (2, "17-0") and split_id("17-0") == (0, "17-0")
    with pytest.raises(ValueError, match="not a sharded stream id"):
        split_id("x/17-0")
    cursor = advance_cursor(None, "1/5-0")
    cursor = advance_cursor(cursor, "0/9-0")
    cursor = advance_cursor(cursor, "1/6-0")
    assert cursor == "0=9-0,1=6-0"
    assert parse_cursor(cursor) == {0: "9-0", 1: "6-0"}
    assert parse_cursor("12-3") == {0: "12-3"} and parse_cursor(None) == {}
    assert advance_cursor("0=9-0", "10-0") == "10-0"  # an unsharded stream's id
    with pytest.raises(ValueError, match="not a sharded stream cursor"):
        parse_cursor("0=1-0,=2-0")


def test_placement_is_stable_and_spreads():
    ids = [f"w3-{i}" for i in range(300)]
    placed = [shard_of(i, 3) for i in ids]
    assert placed == [shard_of(i, 3) for i in ids]  # same id, same shard, every time
    counts = np.bincount(placed, minlength=3)
    assert counts.min() > 70, counts  # ~100 each


class Refusing:
    """A shard whose server is down: every call fails."""

    def __init__(self, inner):
        self.inner, self.key = inner, "down-shard"
        self.config, self.rejected, self.skipped_duplicates = inner.config, inner.rejected, 0

    def writer_counts(self):
        return self.inner.writer_counts()  # kept by the client: no call to the server

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise TransportError("cannot reach Redis at 10.0.0.9:6379: Connection refused")
        return fail


def test_a_down_shards_games_go_to_the_next_and_reads_go_on(caplog):
    streams = MemoryTransport("r", stream_shards=3).samples()
    assert isinstance(streams, ShardedSampleStream)
    streams.shards[1] = Refusing(streams.shards[1])
    games = [game(f"g{i}") for i in range(30)]
    ids = streams.append(games[:15]) + streams.append(games[15:])
    to_down = {g.game_id for g in games if shard_of(g.game_id, 3) == 1}
    assert streams.rerouted == len(to_down) > 0
    assert streams.writer_counts() == WriterCounts(rerouted=len(to_down))
    assert all(i.startswith("2/") for i, g in zip(ids, games, strict=True)
               if g.game_id in to_down)
    got = []
    while batch := streams.read(8):
        got += batch
        streams.ack([i for i, _ in batch])
    assert sorted(g.game_id for _, g in got) == sorted(g.game_id for g in games)
    assert streams.shard_errors[1] >= 3
    warned = [r.getMessage() for r in caplog.records if "down-shard" in r.getMessage()]
    assert len(warned) == 1, warned  # once when it started failing, not once per call

    for k in (0, 2):
        streams.shards[k] = Refusing(streams.shards[k])
    with pytest.raises(TransportError, match="every sample stream shard failed"):
        streams.read(8)
    with pytest.raises(TransportError, match="Connection refused"):
        streams.append(games[:1])


def test_info_counts_a_down_shard_with_its_last_answer():
    streams = MemoryTransport("r", stream_shards=2).samples()
    streams.append([game(f"g{i}") for i in range(10)])
    lengths = [i.length for i in streams.shard_infos()]
    assert sum(lengths) == 10 and min(lengths) > 0
    streams.shards[1] = Refusing(streams.shards[1])
    assert streams.info().length == 10  # shard 1 as last seen
    streams.shards[0] = Refusing(streams.shards[0])
    with pytest.raises(TransportError):
        streams.info()


def test_an_ack_with_one_shard_down_acks_the_others_and_names_what_it_could_not():
    streams = MemoryTransport("r", stream_shards=2).samples()
    streams.append([game(f"g{i}") for i in range(20)])
    got = []
    while batch := streams.read(8):
        got += batch
    ids = [i for i, _ in got]
    on_one = [i for i in ids if i.startswith("1/")]
    assert 0 < len(on_one) < len(ids)
    real = streams.shards[1]
    streams.shards[1] = Refusing(real)
    with pytest.raises(PartialAckError, match="Connection refused") as caught:
        streams.ack(ids)
    assert caught.value.failed == on_one  # as given, shard prefix and all
    assert streams.shards[0].info().pending == 0  # shard 0's were acked all the same
    streams.shards[1] = real
    assert streams.ack(caught.value.failed) == len(on_one)
    assert streams.info().pending == 0
    # every shard down: the plain error, nothing acked
    streams.shards[0], streams.shards[1] = Refusing(streams.shards[0]), Refusing(real)
    with pytest.raises(TransportError) as whole:
        streams.ack(ids)
    assert not isinstance(whole.value, PartialAckError)
