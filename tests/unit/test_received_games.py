"""The learner's record of every game received over the run (``ReceivedGames``)."""

from __future__ import annotations

import random

import pytest

from zeroforge.learner.received_games import ReceivedGames


def test_a_copy_is_known_however_many_games_came_since():
    received = ReceivedGames()
    received.remember("w0-ab12-0")
    for n in range(200_000):  # far past any window of recent ids
        received.remember(f"w1-cd34-{n}")
    assert "w0-ab12-0" in received and "w1-cd34-0" in received
    assert "w0-ab12-1" not in received and "w1-cd34-200000" not in received
    assert len(received) == 200_001
    # in order, a producer costs one count: nothing is left out of order
    assert received.to_state() == {"w0-ab12": [1, []], "w1-cd34": [200_000, []]}


@pytest.mark.parametrize("seed", range(5))
def test_out_of_order_ids_equal_a_plain_set_and_round_trip(seed):
    """Ids arriving shuffled within a few hundred (rerouted shards), with copies and ids
    of other forms: membership, split and the checkpointed form agree with a set."""
    rng = random.Random(seed)
    ids = [f"w{p}-x{p}-{n}" for p in range(4) for n in range(500)]
    ids += ["bad", "g42", "w9-x-007", "w9-x--1", "w9-x-1e3", "w9-x-²"]  # kept whole
    order = sorted(range(len(ids)), key=lambda i: i + rng.randrange(300))
    received, plain = ReceivedGames(), set()
    for i in order:
        game_id = ids[i]
        if rng.random() < 0.5:
            assert (game_id in received) == (game_id in plain)
        received.remember(game_id)
        plain.add(game_id)
        if rng.random() < 0.1:  # a copy of an earlier one
            received.remember(ids[order[rng.randrange(order.index(i) + 1)]])
    assert len(received) == len(plain) == len(ids)
    assert sorted(received) == sorted(plain)  # iterating gives every id once
    assert all(game_id in received for game_id in ids)
    assert not any(f"w{p}-x{p}-{n}" in received for p in range(4) for n in (500, 501))
    back = ReceivedGames.from_state(received.to_state())
    assert len(back) == len(ids) and all(game_id in back for game_id in ids)
    assert back.to_state() == received.to_state()
    fresh, copies = back.split(["w0-x0-3", "w0-x0-500", "w0-x0-500", "", "new"])
    assert (fresh, copies) == ([1, 3, 4], [0, 2])


@pytest.mark.parametrize("state", [{"w": [3, [2]]}, {"w": [-1, []]}, {"w": ["x", []]},
                                   {"w": [1]}])
def test_a_malformed_state_is_refused(state):
    with pytest.raises(ValueError, match="received games of 'w'"):
        ReceivedGames.from_state(state)


def test_a_learner_drops_a_copy_that_comes_long_after_and_after_a_restart(tmp_path):
    """A learner whose window of recent ids holds 50 (as a long outage outruns today's
    10,000): the late copy of its first game is still dropped, before and after a restart
    from the checkpoint."""
    import dataclasses

    from tests.unit.memory_learner import memory_learner
    from tests.unit.test_sample_fuzz import real_games
    from zeroforge.shared.samples import encode
    from zeroforge.shared.transport import MemoryTransport

    transport = MemoryTransport("late")

    def learner():
        return memory_learner(tmp_path, transport, resume=True, max_backlog=10,
                              min_replay=10**9, checkpoint_every_s=0.0, recent_game_ids=50)

    base = real_games(3)
    games = [dataclasses.replace(base[n % 3], game_id=f"w{n % 7}-p{n % 7}-{n // 7}")
             for n in range(400)]
    service = learner()
    stream = transport.samples()
    stream.append_raw([encode(g) for g in games])
    while service.run_once(max_read=64, block_ms=0)["read"]:
        pass
    assert service.games_received == 400 and len(service.game_ids()) == 50
    stream.append_raw([encode(games[0])])  # 400 games later
    service.run_once(max_read=64, block_ms=0)
    assert service.rejected["duplicate"] == 1 and service.games_received == 400
    service.stop()
    service = learner()  # a restart from the checkpoint
    stream.append_raw([encode(games[1]), encode(games[7])])
    service.run_once(max_read=64, block_ms=0)
    assert service.rejected["duplicate"] == 3 and service.games_received == 400
    assert stream.info().lag == 0
    service.close()
