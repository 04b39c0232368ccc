"""The controller's real code on a fake cluster of thousands of simulated actors
(``benchmarks/fake_cluster.py``, at the controller's one Ray seam ``ray_calls``): what it
keeps, fetches and asks per tick grows with the hosts of a run, not its workers; status
has a row per host and pages through the workers; a successor controller takes the run
over from the small state."""

from __future__ import annotations

import pytest

from benchmarks.control_plane import measure
from benchmarks.fake_cluster import simulated_run
from zeroforge.shared import metrics
from zeroforge.shared.transport import encode_control_state

NODES = 300
NODE_HOSTS = 0
"""``distributed.workers_per_host`` of node hosts."""


def test_state_ticks_and_calls_do_not_grow_with_the_workers() -> None:
    """600 and 2,000 workers on the same 300 nodes, node hosts: the state the driver
    fetches stays under 100 kB and the same size, and so do the Ray calls of a tick; a
    steady tick asks the GCS nothing."""
    small = measure(600, NODES, NODE_HOSTS, ticks=3)
    large = measure(2000, NODES, NODE_HOSTS, ticks=3)
    # nodes of 2 and of 7 CPUs (the first one 4 more, the learner's and the evaluator's):
    # a host a node at most, every node full but the last
    assert 300 - 2 <= small["hosts"] <= 300 and 2000 // 7 - 2 <= large["hosts"] <= 2000 // 7 + 1
    for row in (small, large):
        assert row["state_bytes"] <= 100_000, row
        assert row["gcs_calls_per_tick"] == 0, row
    assert large["state_bytes"] <= 1.1 * small["state_bytes"], (small, large)
    assert large["ray_calls_per_tick"] <= small["ray_calls_per_tick"], (small, large)
    # a host's one transport: 3 calls at once and one blocked read for the run's one
    # shard, whatever its workers (the bound itself: tests/integration/test_host_connections
    # and test_worker_relay, against a real Redis)
    for row in (small, large):
        assert row["redis_clients"] == row["hosts"] * (3 + 1), row
    assert large["redis_clients"] <= small["redis_clients"], (small, large)


def test_the_state_of_one_worker_per_actor_grows_with_the_actors() -> None:
    """The same measure tells the other shape apart: with one worker an actor the
    controller has an actor per worker, and its state and connections grow with them
    (what node hosts, the default, are for)."""
    few = measure(200, NODES, 1, ticks=1)
    many = measure(800, NODES, 1, ticks=1)
    assert many["state_bytes"] > 3 * few["state_bytes"], (few, many)
    assert many["redis_clients"] == 800 and few["redis_clients"] == 200


def test_status_has_a_row_per_host_and_pages_through_the_workers() -> None:
    with simulated_run(2000, NODES, NODE_HOSTS, run_id="rows") as (controller, fake):
        st = controller.status()
        rows = [r for r in st["actors"] if r["kind"] == "selfplay"]
        assert len(rows) == len(fake.selfplay()) == 286
        assert sum(r["workers"] for r in rows) == 2000
        total = metrics.total(controller.metrics.merged, "selfplay_games_total")
        assert sum(r["games"] for r in rows) == pytest.approx(total)
        first = controller.worker_rows(0)
        assert first["workers"] == 2000 and first["pages"] == 20
        assert [r["index"] for r in first["rows"]] == list(range(100))
        host_of = {w: a.index for a in fake.selfplay() for w in range(a.first,
                                                                   a.first + a.count)}
        assert all(r["host"] == host_of[r["index"]] for r in first["rows"])
        last = controller.worker_rows(19)
        assert [r["index"] for r in last["rows"]] == list(range(1900, 2000))
        assert controller.worker_rows(20)["rows"] == []
        with pytest.raises(ValueError, match="page must be >= 0"):
            controller.worker_rows(-1)


def test_a_successor_takes_over_from_the_small_state() -> None:
    """A controller dies; its successor adopts the live hosts from its last state. One
    host died while no controller watched: its games still count (under
    ``worker="ended"``), and the run's totals do not go back."""
    with simulated_run(1200, NODES, NODE_HOSTS, run_id="takeover") as (first, fake):
        first.tick()
        state = first.controller_state()
        games = metrics.total(first.metrics.merged, "selfplay_games_total")
        assert len(encode_control_state(state)) <= 100_000
        lost = fake.selfplay()[5]
        lost_games = metrics.snapshot_total(lost._reply, "selfplay_games_total")
        lost.die()
    with simulated_run(1200, NODES, NODE_HOSTS, fake=fake, takeover=state,
                       run_id="takeover") as (second, _):
        second.tick()
        merged = second.metrics.merged
        assert second.restarts["selfplay"] == 1
        live = [s for s in second.slots["selfplay"] if not s.stopping]
        assert len(live) == 300  # 299 adopted, one replacing the lost host
        replacement = fake.selfplay()[-1]
        assert replacement.index == 300 and replacement.count == lost.count
        # the lost host's CPUs are free again: its replacement takes them, and new worker
        # indexes (ids stay unique)
        assert replacement.first == 1200
        new_games = metrics.snapshot_total(replacement._reply, "selfplay_games_total")
        assert metrics.total(merged, "selfplay_games_total") == \
            pytest.approx(games + new_games)
        assert metrics.total(merged, "selfplay_games_total", worker="ended") == \
            pytest.approx(lost_games)
