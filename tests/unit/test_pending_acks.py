"""The learner's pending acks (``learner/pending_acks.py``) over a stream whose shard 1 is
down: the other shard's ids are acked in every chunk, only shard 1's are kept, and the
ids carried over do not make every turn checkpoint early."""

from __future__ import annotations

import logging

from zeroforge.learner.pending_acks import ACK_CHUNK, PendingAcks, ack
from zeroforge.shared.transport import PartialAckError, TransportError


class Stream:
    """Acks ids; those of the shards in ``down`` fail (a partial failure when others are
    up, the whole ack when all are)."""

    def __init__(self, down: set[str]) -> None:
        self.down, self.acked, self.calls = down, [], 0

    def ack(self, ids: list[str]) -> int:
        self.calls += 1
        failed = [i for i in ids if i.split("/")[0] in self.down]
        ok = [i for i in ids if i not in failed]
        if failed and not ok:
            raise TransportError("cannot reach Redis: Connection refused")
        self.acked += ok
        if failed:
            raise PartialAckError("cannot reach Redis: Connection refused", failed)
        return len(ok)


def ids(n: int) -> list[str]:
    return [f"{k % 2}/{k}-0" for k in range(n)]


def test_a_down_shard_keeps_only_its_own_ids_in_every_chunk(caplog):
    stream = Stream(down={"1"})
    pending = PendingAcks()
    for i in ids(2 * ACK_CHUNK + 10):
        pending.add(i)
    with caplog.at_level(logging.WARNING):
        kept = pending.ack_all(stream)
    assert stream.calls == 3  # every chunk tried
    assert sorted(stream.acked) == sorted(i for i in ids(2 * ACK_CHUNK + 10)
                                          if i.startswith("0/"))
    assert pending.ids == [i for i in ids(2 * ACK_CHUNK + 10) if i.startswith("1/")]
    assert pending.carried == len(pending.ids) == kept > 0
    assert len([r for r in caplog.records if "retrying later" in r.getMessage()]) == 1
    # what was carried over does not count toward an early checkpoint; new entries do
    assert not pending.due_early(100)
    for k in range(100):
        pending.add(f"0/new{k}-0")
    assert pending.due_early(100)
    stream.down = set()  # the shard is back: the next ack takes everything
    assert pending.ack_all(stream) == 0
    assert len(pending) == 0 and pending.carried == 0


def test_a_redis_down_keeps_the_rest_of_the_list_and_stops_trying():
    stream = Stream(down={"0", "1"})
    kept = ack(stream, ids(3 * ACK_CHUNK))
    assert kept == ids(3 * ACK_CHUNK) and stream.calls == 1
